"""A TCP forwarder in a process of its own: `python tcp_forward.py LISTEN_PORT TARGET_PORT [ANSWERED]`
forwards 127.0.0.1:LISTEN_PORT to 127.0.0.1:TARGET_PORT byte for byte, and prints "ready" once it listens.

The server tests point the job at it and SIGKILL it mid-run: to the job that is exactly a server
process killed (the kernel resets its connections, the port then refuses), while the real vLLM server
behind it stays up for the re-run and the other tests (one server start per test session).

With ANSWERED, only the first ANSWERED POST requests (over all connections; a client sends one request
at a time on a connection) get their answers: every later one reaches the server, but its answer is
held back for good. To the job that is a server that stopped answering, at a point the test chooses
whatever the speed of the machine: a request that times out, or a job that cannot finish before the
test kills the forwarder.
"""

import asyncio
import sys

POSTS = [0]  # POST requests seen so far, on every connection


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, hold=None, count=None) -> None:
    try:
        while data := await reader.read(1 << 16):
            if count is not None:
                count(data)
            if hold is None or not hold():
                writer.write(data)
                await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        writer.close()


async def _serve(listen: int, target: int, answered: int | None) -> None:
    async def connect(client_reader, client_writer):
        server_reader, server_writer = await asyncio.open_connection("127.0.0.1", target)
        held = [False]

        def count(data: bytes) -> None:  # a request going out on this connection
            POSTS[0] += data.count(b"POST ")
            held[0] = held[0] or (answered is not None and POSTS[0] > answered)

        await asyncio.gather(_pipe(client_reader, server_writer, count=count),
                             _pipe(server_reader, client_writer, hold=lambda: held[0]))

    server = await asyncio.start_server(connect, "127.0.0.1", listen, reuse_address=True)
    print("ready", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(_serve(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) > 3 else None))
