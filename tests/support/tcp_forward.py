"""A TCP forwarder in a process of its own: `python tcp_forward.py LISTEN_PORT TARGET_PORT [ANSWERED]`
forwards 127.0.0.1:LISTEN_PORT to 127.0.0.1:TARGET_PORT byte for byte, and prints "ready" once it listens.

The server tests point the job at it and SIGKILL it mid-run: to the job that is exactly a server
process killed (the kernel resets its connections, the port then refuses), while the real vLLM server
behind it stays up for the re-run and the other tests (one server start per test session).

With ANSWERED, only the first ANSWERED answers to POST requests (over all connections) reach the
client. From the next one on, that connection's answers are held back for good: the connection stays
open to the client even where the server closes its side (vLLM closes a connection idle for 5 s after
an answer: VLLM_HTTP_TIMEOUT_KEEP_ALIVE), so the request waits until the client gives up. To the job
that is a server that stopped answering, at a point the test chooses whatever the speed of the
machine: a request that times out, or a job that cannot finish before the test kills the forwarder.

Answers are counted, not requests: a POST that never got an answer (sent on a connection the server
was closing: the client sees a reset and sends it again) does not use up one of the ANSWERED.
"""

import asyncio
import re
import sys

ANSWERS = [0]  # answers to POST requests seen so far, on every connection
REQUEST_LINE = re.compile(rb"(POST|GET|HEAD|PUT|DELETE|OPTIONS) /")  # base64 frames hold no space


async def _serve(listen: int, target: int, answered: int | None) -> None:
    async def connect(client_reader, client_writer):
        server_reader, server_writer = await asyncio.open_connection("127.0.0.1", target)
        sent: list[bytes] = []  # the methods of the requests on this connection not answered yet
        held = [False]
        client_gone = asyncio.Event()

        async def upstream() -> None:  # the client's requests, to the server
            try:
                while data := await client_reader.read(1 << 16):
                    sent.extend(match.group(1) for match in REQUEST_LINE.finditer(data))
                    server_writer.write(data)
                    await server_writer.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                client_gone.set()
                server_writer.close()

        async def downstream() -> None:  # the server's answers, to the client unless held
            try:
                while data := await server_reader.read(1 << 16):
                    for _ in range(data.count(b"HTTP/1.1 ")):  # an answer starts: to the oldest request
                        if sent and sent.pop(0) == b"POST":
                            ANSWERS[0] += 1
                            held[0] = held[0] or (answered is not None and ANSWERS[0] > answered)
                    if not held[0]:
                        client_writer.write(data)
                        await client_writer.drain()
            except (ConnectionError, OSError):
                pass
            if held[0]:  # the server closed its side: the client still waits, until it gives up
                await client_gone.wait()
            client_writer.close()

        await asyncio.gather(upstream(), downstream())

    server = await asyncio.start_server(connect, "127.0.0.1", listen, reuse_address=True)
    print("ready", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(_serve(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) > 3 else None))
