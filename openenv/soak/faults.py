"""`FaultProxy`: a loopback HTTP reverse proxy in front of a backend that breaks on command.

Reliability tests put it between the capture proxy and vLLM (`VLLMBackend(fault_proxy.url)`) and, mid
episode, make the backend go down (connection reset, no HTTP reply), slow (the reply waits `delay_s`, past
the client's timeout), held (the reply waits until the test calls `release()`: a stall whose end the test
decides, so what happens during it does not race a clock) or failing (an HTTP error with a JSON body), for
the next N requests or until told otherwise. It is raw asyncio rather than an ASGI app because "down" must
drop the TCP connection with no reply at all, which ASGI servers cannot express; bytes are piped as they
arrive, so streams stay unbuffered.

Each client connection carries one request: the proxy asks the backend for `Connection: close` and tells
the client the same, so every request is a fresh decision and no pooled connection outlives a fault.
"""

from __future__ import annotations

import asyncio
import json
import socket
import struct
import threading
from collections import Counter
from typing import Literal, Self
from urllib.parse import urlsplit

from openenv.core.loop_thread import LoopThread

__all__ = ["FaultMode", "FaultProxy"]

FaultMode = Literal["pass", "down", "slow", "hold", "error"]
_MODES: tuple[FaultMode, ...] = ("pass", "down", "slow", "hold", "error")
_HOP_HEADERS = {b"connection", b"keep-alive", b"proxy-connection"}
_MAX_HEAD = 64 * 1024
_REASONS = {
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}


class _Plan:
    """What to do with one request, decided when it arrives."""

    __slots__ = ("delay_s", "mode", "status")

    def __init__(self, mode: FaultMode, delay_s: float, status: int) -> None:
        self.mode = mode
        self.delay_s = delay_s
        self.status = status


class FaultProxy:
    """A reverse proxy to `upstream` on `host:port` (0 picks a free port), served in a daemon thread.

    `set()`, `held()` and `release()` are thread-safe: call them from the test thread while requests flow.
    `stats` counts requests seen (`requests`), requests handled per mode (`pass`, `down`, `slow`, `hold`,
    `error`), and slow or held ones whose client hung up first, so they never reached the backend (`dropped`).

    Example:
        with FaultProxy(vllm_url) as faults:
            backend = VLLMBackend(faults.url, model="tiny")
            faults.set("down", count=2)   # the next two backend requests get a connection reset
            faults.set("hold", count=1)   # the next one waits, however long the client does...
            assert faults.held(timeout=30)  # ...and it is waiting now
            faults.release()              # forwarded now (unless its client hung up meanwhile)
    """

    def __init__(self, upstream: str, *, host: str = "127.0.0.1", port: int = 0) -> None:
        parts = urlsplit(upstream if "://" in upstream else f"http://{upstream}")
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"FaultProxy forwards plain http:// upstreams; got {upstream!r}")
        self._up_host = parts.hostname
        self._up_port = parts.port or 80
        self._up_netloc = parts.netloc.encode()
        self.host = host
        self.port = port
        self._lock = threading.Lock()
        self._plan = _Plan("pass", 5.0, 500)
        self._left: int | None = None
        self._counts: Counter[str] = Counter()
        self._loop: LoopThread | None = None
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._release = asyncio.Event()  # set on the proxy's loop (by `release()`); a new one per `set()`
        self._holding = threading.Event()  # a request of the current `set("hold")` is being held

    @property
    def url(self) -> str:
        """The base URL to hand the client instead of the upstream's."""
        return f"http://{self.host}:{self.port}"

    @property
    def stats(self) -> dict[str, int]:
        with self._lock:
            return {
                "requests": self._counts["requests"],
                **{m: self._counts[m] for m in _MODES},
                "dropped": self._counts["dropped"],
            }

    def set(
        self, mode: FaultMode, *, count: int | None = None, delay_s: float = 5.0, status: int = 500
    ) -> None:
        """Handle the next `count` requests (all of them when None) with `mode`, then go back to `pass`."""
        if mode not in _MODES:
            raise ValueError(f"mode must be one of {_MODES}; got {mode!r}")
        if count is not None and count < 0:
            raise ValueError(f"count must be >= 0 or None; got {count}")
        with self._lock:
            self._plan = _Plan(mode, delay_s, status)
            self._left = count
            self._release = asyncio.Event()
            self._holding.clear()

    def held(self, timeout: float | None = None) -> bool:
        """Wait until a request is being held (`set("hold")`); False if none is after `timeout` seconds."""
        return self._holding.wait(timeout)

    def release(self) -> None:
        """Let the held requests (and any later ones of this `set("hold")`) through to the backend."""
        with self._lock:
            release = self._release
        if self._loop is not None:
            self._loop.loop.call_soon_threadsafe(release.set)

    def _next_plan(self) -> _Plan:
        with self._lock:
            self._counts["requests"] += 1
            plan = self._plan
            if self._left is not None:
                if self._left <= 0:
                    plan = self._plan = _Plan("pass", 5.0, 500)
                    self._left = None
                else:
                    self._left -= 1
            self._counts[plan.mode] += 1
            return plan

    # ---- lifecycle --------------------------------------------------------------------------------

    def start(self, timeout: float = 10.0) -> Self:
        """Listen in a background thread; returns once the socket accepts connections."""
        self._loop = LoopThread("fault-proxy").start(timeout)
        try:
            self._server = self._loop.run(asyncio.start_server(self._client, self.host, self.port), timeout)
        except Exception as exc:
            self._loop.stop()
            self._loop = None
            raise RuntimeError(f"FaultProxy did not start on {self.host}:{self.port}: {exc}") from exc
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def stop(self) -> None:
        """Stop listening and drop every open connection."""
        loop = self._loop
        if loop is None:
            return
        if loop.running:
            loop.run(self._shutdown(), 10)
        loop.stop(10)
        self._loop = self._server = None

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- one connection, one request ------------------------------------------------------------------

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            head, body = await _read_request(reader)
            if head is None:
                return
            if _header(head, b"transfer-encoding") is not None:
                await _reply_error(writer, 501, "FaultProxy forwards Content-Length bodies only")
                return
            await self._handle(self._next_plan(), head, body, reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        finally:
            self._tasks.discard(task)
            if not writer.is_closing():
                writer.close()

    async def _handle(
        self,
        plan: _Plan,
        head: list[bytes],
        body: bytes,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        if plan.mode == "down":
            _reset(writer)
            return
        if plan.mode == "error":
            await _reply_error(writer, plan.status)
            return
        if plan.mode in ("slow", "hold"):
            if plan.mode == "slow":
                left = await _client_left_within(reader, plan.delay_s)
            else:
                with self._lock:
                    release = self._release
                self._holding.set()
                left = await _client_left_before(reader, release)
            if left:  # the client timed out and hung up; the backend never sees the request
                with self._lock:
                    self._counts["dropped"] += 1
                return
        await self._forward(head, body, writer)

    async def _forward(self, head: list[bytes], body: bytes, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(self._up_host, self._up_port)
        except OSError:
            _reset(writer)  # the real backend is down: the client sees what it would have seen
            return
        try:
            up_writer.write(_rewrite_head(head, host=self._up_netloc) + body)
            await up_writer.drain()
            reply_head = await up_reader.readuntil(b"\r\n\r\n")
            writer.write(_rewrite_head(reply_head.split(b"\r\n")[:-2]))
            while chunk := await up_reader.read(65536):
                writer.write(chunk)
                await writer.drain()
        finally:
            up_writer.close()


async def _read_request(reader: asyncio.StreamReader) -> tuple[list[bytes] | None, bytes]:
    """(head lines, body) of one request; (None, b"") when the client closed without one."""
    try:
        raw = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None, b""
    if len(raw) > _MAX_HEAD:
        return None, b""
    lines = raw.split(b"\r\n")[:-2]
    length = int(_header(lines, b"content-length") or 0)
    return lines, await reader.readexactly(length) if length else b""


def _header(lines: list[bytes], wanted: bytes) -> bytes | None:
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == wanted:
            return value.strip()
    return None


def _rewrite_head(lines: list[bytes], *, host: bytes | None = None) -> bytes:
    """The head with hop-by-hop headers replaced by `Connection: close` (and `Host` pointed upstream)."""
    out = [lines[0]]
    for line in lines[1:]:
        name = line.partition(b":")[0].strip().lower()
        if name in _HOP_HEADERS or (host is not None and name == b"host"):
            continue
        out.append(line)
    if host is not None:
        out.append(b"Host: " + host)
    out.append(b"Connection: close")
    return b"\r\n".join(out) + b"\r\n\r\n"


def _reset(writer: asyncio.StreamWriter) -> None:
    """Drop the connection with a TCP RST (SO_LINGER 0): no HTTP reply at all."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


async def _reply_error(writer: asyncio.StreamWriter, status: int, message: str = "") -> None:
    message = message or f"fault injected by FaultProxy: HTTP {status}"
    body = json.dumps({"error": {"message": message, "type": "fault_injected", "code": status}}).encode()
    head = (
        f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    ).encode()
    writer.write(head + body)
    await writer.drain()


async def _client_left_within(reader: asyncio.StreamReader, delay_s: float) -> bool:
    """Wait `delay_s`; True as soon as the client hangs up (EOF) before that."""
    try:
        return await asyncio.wait_for(reader.read(1), delay_s) == b""
    except TimeoutError:
        return False


async def _client_left_before(reader: asyncio.StreamReader, release: asyncio.Event) -> bool:
    """Wait until `release` is set; True as soon as the client hangs up (EOF) before that."""
    eof = asyncio.ensure_future(reader.read(1))
    released = asyncio.ensure_future(release.wait())
    try:
        done, _ = await asyncio.wait({eof, released}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (eof, released):
            task.cancel()
    return eof in done and (eof.exception() is not None or eof.result() == b"")
