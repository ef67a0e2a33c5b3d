"""An HTTP proxy on loopback that makes an S3 endpoint unreliable, in a process of its own:
`python s3_faults.py LISTEN_PORT TARGET_PORT PATTERN` prints "ready" once it listens, and a line per fault.

Each request (over all connections, counted from 1) is passed to the store unless PATTERN names its number:
PATTERN is a comma-separated list of `N:slowdown` (answered 503 SlowDown, S3's throttling answer, without
reaching the store), `N:drop` (the connection closed before any answer), `N:cut` (the store's answer
cut off halfway through its body), `N:stall` (never answered: the connection held open until the client's
read timeout gives up on it) and `N:gone` (from that request on the store is gone: every connection
reset, the port closed, so later connections are refused). Faults are placed by request number, so a
test hits the listing, the HEADs and the range reads whatever the speed of the machine.

One request at a time per connection, as HTTP/1.1 clients send them; bodies by Content-Length (botocore
sends and moto answers them so).
"""

import asyncio
import sys

SLOWDOWN = (b"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>SlowDown</Code><Message>Please reduce your "
            b"request rate.</Message><RequestId>vidcap-test</RequestId></Error>")
SEEN = [0]


async def _message(reader: asyncio.StreamReader, method: bytes | None = None) -> bytes | None:
    """One HTTP message, head and body (by Content-Length); None at the end of the stream. `method`: the
    request's, for an answer (a HEAD's answer has no body whatever its Content-Length says)."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    if method == b"HEAD" or head.split(b" ", 2)[1:2] in ([b"204"], [b"304"]):
        length = 0
    body = await reader.readexactly(length) if length else b""
    return head + body


async def _serve(listen: int, target: int, faults: dict[int, str]) -> None:
    clients: set = set()
    gone = asyncio.Event()

    async def connect(client_reader, client_writer):
        upstream = None
        clients.add(client_writer)
        try:
            while (request := await _message(client_reader)) is not None:
                SEEN[0] += 1
                fault = faults.get(SEEN[0])
                method = request.split(b" ", 1)[0]
                if fault:
                    print(f"{SEEN[0]} {fault} {request.split(b' ', 2)[1].decode(errors='replace')[:120]}", flush=True)
                if fault == "gone":
                    gone.set()
                    for writer in clients:
                        writer.transport.abort()  # a reset, as the kernel gives for a process killed
                    return
                if fault == "drop":
                    return
                if fault == "stall":
                    await client_reader.read()  # until the client closes the connection it gave up on
                    return
                if fault == "slowdown":
                    client_writer.write(b"HTTP/1.1 503 Slow Down\r\nContent-Type: application/xml\r\n"
                                        b"Content-Length: %d\r\n\r\n" % len(SLOWDOWN) + SLOWDOWN)
                    await client_writer.drain()
                    continue
                if upstream is None:
                    upstream = await asyncio.open_connection("127.0.0.1", target)
                upstream[1].write(request)
                await upstream[1].drain()
                answer = await _message(upstream[0], method)
                if answer is None:
                    return
                if fault == "cut":
                    head_end = answer.index(b"\r\n\r\n") + 4
                    client_writer.write(answer[: head_end + (len(answer) - head_end) // 2])
                    await client_writer.drain()
                    return
                client_writer.write(answer)
                await client_writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            clients.discard(client_writer)
            client_writer.close()
            if upstream is not None:
                upstream[1].close()

    server = await asyncio.start_server(connect, "127.0.0.1", listen, reuse_address=True)
    print("ready", flush=True)
    async with server:
        await gone.wait()
    server.close()  # the port refuses from now on
    await asyncio.Event().wait()  # until killed


if __name__ == "__main__":
    pattern = dict(item.split(":") for item in sys.argv[3].split(",") if item) if len(sys.argv) > 3 else {}
    asyncio.run(_serve(int(sys.argv[1]), int(sys.argv[2]), {int(n): kind for n, kind in pattern.items()}))
