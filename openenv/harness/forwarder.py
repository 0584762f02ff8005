"""Byte forwarders that carry the proxy into a loopback-only network namespace through a unix socket.

Outside the namespace, `UnixToTcpBridge` listens on a unix socket and connects each client to the proxy
on 127.0.0.1. Inside, this file runs as a script (stdlib only, so it needs no install there) and listens
on 127.0.0.1:PORT, connecting each client to that unix socket. The harness keeps its usual base URL.

    python forwarder.py --listen 127.0.0.1:PORT --to-unix /path/sock --ready /path/ready-file

As that script it splices with plain sockets and threads (`serve_tcp_to_unix_threads`), and `asyncio`
is imported only by the in-process half: every sandboxed command waits for this script to listen
before its harness starts, and importing asyncio cost 0.07 of its 0.1 CPU-s start (1 s wall on a
loaded machine; issue 48).
"""

from __future__ import annotations

import argparse
import contextlib
import socket
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING or __name__ != "__main__":
    import asyncio  # the in-process half only: the script's start must not pay for it (see above)

__all__ = ["UnixToTcpBridge", "serve_tcp_to_unix", "serve_tcp_to_unix_threads", "splice_handler"]

_CHUNK = 65536


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy until EOF, then half-close, so a client that shuts down its write side still gets the reply."""
    try:
        while data := await reader.read(_CHUNK):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (OSError, asyncio.CancelledError):  # OSError: write_eof on a peer already gone raises ENOTCONN
        pass


def splice_handler(
    connect: Callable[[], Awaitable[tuple[asyncio.StreamReader, asyncio.StreamWriter]]],
) -> Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]:
    """A stream server's handler that connects each client with `connect()` and copies both ways."""
    # The loop keeps only weak references to tasks, and while both sockets have reading paused (flow
    # control) nothing else reaches a connection's task: the garbage collector then destroys it mid-copy,
    # closing both ends ("Task was destroyed but it is pending!"; the harness sees its reply cut off).
    live: set[asyncio.Task[None]] = set()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        live.add(task)
        try:
            try:
                up_reader, up_writer = await connect()
            except OSError:
                writer.close()
                return
            try:
                await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
            finally:
                for end in (writer, up_writer):
                    with contextlib.suppress(Exception):
                        end.close()
        finally:
            live.discard(task)

    return handle


class UnixToTcpBridge:
    """A unix-socket listener, on its own thread, that forwards every connection to HOST:PORT."""

    def __init__(self, socket_path: Path, host: str, port: int) -> None:
        self.socket_path = socket_path
        # Imported here: inside the namespace this file runs as a stdlib-only script, without openenv.
        from openenv.core.loop_thread import LoopThread

        self._target = (host, port)
        self._loop = LoopThread(f"bridge-{port}")
        self._server: asyncio.Server | None = None

    def start(self) -> UnixToTcpBridge:
        self._loop.start()
        handler = splice_handler(lambda: asyncio.open_connection(*self._target))
        try:
            self._server = self._loop.run(asyncio.start_unix_server(handler, path=str(self.socket_path)), 10)
        except Exception as exc:
            self._loop.stop()
            raise RuntimeError(f"unix bridge on {self.socket_path} did not start: {exc}") from exc
        return self

    def close(self) -> None:
        if self._loop.running:
            self._loop.run(self._shutdown(), 5)
            self._loop.stop(5)
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()

    async def _shutdown(self) -> None:
        # Stop accepting; the connections still open (a hung or killed harness's) are cancelled when the
        # loop stops, so their sockets close now rather than when the loop is collected.
        if self._server is not None:
            self._server.close()


async def serve_tcp_to_unix(host: str, port: int, socket_path: str, ready: Path | None = None) -> None:
    """Listen on HOST:PORT and forward every connection to the unix socket; runs until cancelled."""
    handler = splice_handler(lambda: asyncio.open_unix_connection(socket_path))
    server = await asyncio.start_server(handler, host, port)
    if ready is not None:
        ready.write_text("ready\n")
    async with server:
        await server.serve_forever()


def _copy(src: socket.socket, dst: socket.socket) -> None:
    """Copy until EOF, then half-close `dst`; on an error, shut both down so the other direction ends."""
    try:
        while data := src.recv(_CHUNK):
            dst.sendall(data)
        dst.shutdown(socket.SHUT_WR)
    except OSError:
        for end in (src, dst):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)


def _splice_client(client: socket.socket, socket_path: str) -> None:
    with client:
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        with upstream:
            try:
                upstream.connect(socket_path)
            except OSError:
                return
            back = threading.Thread(target=_copy, args=(upstream, client), daemon=True)
            back.start()
            _copy(client, upstream)
            back.join()


def serve_tcp_to_unix_threads(host: str, port: int, socket_path: str, ready: Path | None = None) -> None:
    """`serve_tcp_to_unix` without asyncio: a thread pair per connection; runs until the process ends."""
    try:
        listener = socket.create_server((host, port), backlog=128)
    except OSError:
        if ready is not None:  # the sandbox's shell waits on this (a FIFO there): tell it, then fail
            ready.write_text("failed\n")
        raise
    if ready is not None:
        ready.write_text("ready\n")
    while True:
        client, _ = listener.accept()
        threading.Thread(target=_splice_client, args=(client, socket_path), daemon=True).start()


def _main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--listen", required=True, help="HOST:PORT inside the namespace")
    parser.add_argument("--to-unix", required=True, help="unix socket reaching the proxy")
    parser.add_argument("--ready", type=Path, help="file written once the listener is bound")
    args = parser.parse_args()
    host, _, port = args.listen.rpartition(":")
    with contextlib.suppress(KeyboardInterrupt):
        serve_tcp_to_unix_threads(host, int(port), args.to_unix, args.ready)


if __name__ == "__main__":
    _main()
