#!/usr/bin/env python3
"""Relays TCP connections between two network namespaces through a Unix socket, which every
namespace of the machine can reach through the file system: run one end in each namespace.

    bridge.py --listen tcp:8080 --to unix:/tmp/x/api.sock      # accepts on 127.0.0.1:8080
    bridge.py --listen unix:/tmp/x/api.sock --to tcp:8080      # connects to 127.0.0.1:8080

Bytes pass unchanged both ways (an end's EOF is passed on as a half-close). Standard library only;
used by tests/lib/proxy.py to give a test's own network namespace exactly one way in or out."""

import argparse
import asyncio
import os
import signal


def endpoint(text: str) -> tuple[str, str]:
    kind, _, where = text.partition(":")
    if kind not in ("tcp", "unix") or not where:
        raise argparse.ArgumentTypeError(f"{text!r}: expected tcp:PORT or unix:PATH")
    return kind, where


async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while chunk := await reader.read(65536):
            writer.write(chunk)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (ConnectionError, OSError):
        pass


async def open_to(to: tuple[str, str]):
    kind, where = to
    if kind == "tcp":
        return await asyncio.open_connection("127.0.0.1", int(where))
    return await asyncio.open_unix_connection(where)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--listen", type=endpoint, required=True)
    parser.add_argument("--to", type=endpoint, required=True)
    args = parser.parse_args()

    async def relay(client_reader, client_writer):
        try:
            upstream_reader, upstream_writer = await open_to(args.to)
        except OSError:
            client_writer.close()
            return
        await asyncio.gather(pipe(client_reader, upstream_writer), pipe(upstream_reader, client_writer))
        for w in (client_writer, upstream_writer):
            w.close()

    kind, where = args.listen
    if kind == "tcp":
        server = await asyncio.start_server(relay, "127.0.0.1", int(where), reuse_address=True)
    else:
        if os.path.exists(where):
            os.unlink(where)
        server = await asyncio.start_unix_server(relay, where)
    print("ready", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))  # ended by its starter: no teardown to do
    asyncio.run(main())
