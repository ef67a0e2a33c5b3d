"""A TCP forwarder in a process of its own: `python tcp_forward.py LISTEN_PORT TARGET_PORT` forwards
127.0.0.1:LISTEN_PORT to 127.0.0.1:TARGET_PORT byte for byte, and prints "ready" once it listens.

The server tests point the job at it and SIGKILL it mid-run: to the job that is exactly a server
process killed (the kernel resets its connections, the port then refuses), while the real vLLM server
behind it stays up for the re-run and the other tests (one server start per test session).
"""

import asyncio
import sys


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(1 << 16):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        writer.close()


async def _serve(listen: int, target: int) -> None:
    async def connect(client_reader, client_writer):
        server_reader, server_writer = await asyncio.open_connection("127.0.0.1", target)
        await asyncio.gather(_pipe(client_reader, server_writer), _pipe(server_reader, client_writer))

    server = await asyncio.start_server(connect, "127.0.0.1", listen, reuse_address=True)
    print("ready", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(_serve(int(sys.argv[1]), int(sys.argv[2])))
