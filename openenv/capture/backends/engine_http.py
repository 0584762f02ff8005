"""`EngineHTTP`: a small HTTP/1.1 keep-alive client for one engine origin.

The proxy calls its engine once per turn, and the client's own CPU is part of every turn's cost.
aiohttp spent ~0.4 CPU-ms per call at 1k prompt tokens and ~0.9 at 31k, most of it in request and
response objects, header multidicts and timers the proxy never reads; this client, one asyncio
protocol per connection with httptools parsing the reply, spends ~0.13 and ~0.3
(bench/bench_backend_client.py). It does only what the backend needs: JSON requests, whole replies
(Content-Length or chunked), pooled keep-alive connections, a connect timeout and a timeout on
silence, and one retry on a fresh connection when a pooled one turns out to have been closed by the
server before it answered a byte (the keep-alive race every pooling client has).
"""

from __future__ import annotations

import asyncio
import ssl
from collections import deque
from collections.abc import Callable
from typing import Protocol
from urllib.parse import urlsplit

import httptools

from openenv.capture.fast_paths import fast_paths

__all__ = [
    "ConnectTimeout",
    "EngineClient",
    "EngineHTTP",
    "HttpxEngine",
    "ReadTimeout",
    "ServerDisconnected",
    "engine_client",
]


class ConnectTimeout(TimeoutError):
    """No connection within the timeout."""


class ReadTimeout(TimeoutError):
    """The server sent no byte of its reply for the timeout."""


class ServerDisconnected(ConnectionError):
    """The connection closed before the reply was complete."""


class _Stale(ServerDisconnected):
    """A pooled connection the server had closed: nothing of the request was answered."""


class _Connection(asyncio.Protocol):
    """One keep-alive connection: one request at a time, the reply gathered whole."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._transport: asyncio.Transport | None = None
        self._parser = httptools.HttpResponseParser(self)
        self._waiter: asyncio.Future[tuple[int, bytes]] | None = None
        self._chunks: list[bytes] = []
        self._sink: Callable[[bytes], None] | None = None  # a streamed 200 reply's body goes here as it comes
        self._timer: asyncio.TimerHandle | None = None
        self._timeout = 0.0
        self._got_bytes = False
        self._keep_alive = False
        self.closed = False
        self.reused = False
        self.idle_since = 0.0

    # ---- asyncio.Protocol --------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]  # asyncio hands a Transport to a stream protocol; typed as BaseTransport

    def data_received(self, data: bytes) -> None:
        if self._waiter is None:  # bytes nobody asked for: the connection cannot be trusted again
            self.close()
            return
        self._got_bytes = True
        self._arm_timer()
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._fail(ServerDisconnected("the server switched protocols"))
        except httptools.HttpParserError as exc:
            self._fail(ServerDisconnected(f"the reply is not valid HTTP: {exc}"))

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._cancel_timer()
        if self._waiter is not None and not self._waiter.done():
            kind = _Stale if self.reused and not self._got_bytes else ServerDisconnected
            self._waiter.set_exception(kind(f"the server closed the connection{f': {exc}' if exc else ''}"))

    # ---- httptools callbacks -----------------------------------------------------------------------

    def on_headers_complete(self) -> None:
        self._keep_alive = self._parser.should_keep_alive()

    def on_body(self, body: bytes) -> None:
        if self._sink is not None and self._parser.get_status_code() == 200:
            self._sink(body)
        else:
            self._chunks.append(body)

    def on_message_complete(self) -> None:
        self._cancel_timer()
        waiter, self._waiter = self._waiter, None
        body, self._chunks = b"".join(self._chunks), []
        if not self._keep_alive:
            self.close()
        if waiter is not None and not waiter.done():
            waiter.set_result((self._parser.get_status_code(), body))

    # ---- use -----------------------------------------------------------------------------------------

    async def exchange(
        self, parts: tuple[bytes, ...], timeout: float, sink: Callable[[bytes], None] | None = None
    ) -> tuple[int, bytes]:
        assert self._transport is not None and self._waiter is None
        self._waiter = self._loop.create_future()
        self._sink = sink
        self._got_bytes = False
        self._timeout = timeout
        self._transport.writelines(parts)
        self._arm_timer()
        try:
            return await self._waiter
        except BaseException:
            self.close()  # cancelled or failed mid-exchange: its reply may still come, so it is not reusable
            raise
        finally:
            self._waiter = None
            self._sink = None

    def close(self) -> None:
        self.closed = True
        self._cancel_timer()
        if self._transport is not None:
            self._transport.abort()

    def _fail(self, error: Exception) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(error)
        self.close()

    def _arm_timer(self) -> None:
        self._cancel_timer()
        self._timer = self._loop.call_later(self._timeout, self._silent)

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _silent(self) -> None:
        self._timer = None
        self._fail(ReadTimeout(f"no byte of the reply for {self._timeout:g} s"))


class EngineHTTP:
    """Requests to one origin (`http://host:port[/prefix]`, or https) over pooled connections.

    Bound to the event loop it was first used on, like any asyncio transport.

    Args:
        base_url: the origin, and a path prefix every request path goes under.
        timeout: seconds to connect, and seconds without a byte of the reply.
        keepalive_s: an idle connection older than this is closed, not reused (keep it below the
            server's own keep-alive, so the pool rarely holds one the server just closed).
    """

    def __init__(self, base_url: str, *, timeout: float, keepalive_s: float = 4.0) -> None:
        url = urlsplit(base_url)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(f"not an http(s) URL: {base_url!r}")
        try:
            explicit = url.port
        except ValueError:
            raise ValueError(f"not a valid port in {base_url!r}") from None
        self._host, self._port = url.hostname, explicit or (443 if url.scheme == "https" else 80)
        self._ssl = ssl.create_default_context() if url.scheme == "https" else None
        self._prefix = url.path.rstrip("/")
        host = f"[{url.hostname}]" if ":" in url.hostname else url.hostname  # an IPv6 literal
        authority = f"{host}:{explicit}" if explicit else host
        self._host_header = f"Host: {authority}\r\n".encode("latin-1")
        self._timeout = timeout
        self._keepalive_s = keepalive_s
        self._idle: deque[_Connection] = deque()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False

    async def request(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        *,
        timeout: float | None = None,
        sink: Callable[[bytes], None] | None = None,
    ) -> tuple[int, bytes]:
        """(status, body) of one request; `body` is sent as JSON; `timeout` overrides the client's.
        With `sink`, a 200 reply's body is handed to it piece by piece as it arrives (a streamed reply;
        the returned body is then empty), and `timeout` bounds the silence between pieces.
        Raises `OSError`s (refused, reset, `ServerDisconnected`) and `TimeoutError`s (`ConnectTimeout`,
        `ReadTimeout`)."""
        self._loop = loop = self._loop or asyncio.get_running_loop()
        timeout = self._timeout if timeout is None else timeout
        head = [f"{method} {self._prefix}{path} HTTP/1.1\r\n".encode("latin-1"), self._host_header]
        if body is not None:
            head.append(b"Content-Type: application/json\r\nContent-Length: %d\r\n" % len(body))
        head.append(b"\r\n")
        parts = (b"".join(head), body) if body else (b"".join(head),)
        conn = self._pooled(loop.time())
        if conn is None:
            conn = await self._connect(loop, timeout)
        try:
            status, data = await conn.exchange(parts, timeout, sink)
        except _Stale:  # the server closed it while it idled: the request was not answered, send it anew
            conn = await self._connect(loop, timeout)
            status, data = await conn.exchange(parts, timeout, sink)
        if self._closed:  # closed while this request was in flight: keep nothing open
            conn.close()
        elif not conn.closed:
            conn.reused, conn.idle_since = True, loop.time()
            self._idle.append(conn)
        return status, data

    def close(self) -> None:
        """Close the idle connections, and those in use once their replies are in."""
        self._closed = True
        self.close_idle()

    def close_idle(self) -> None:
        """Close and forget the idle connections; the client stays usable (the next request connects).
        A pool only drops a connection when a later request passes it, so after a peak of N concurrent
        turns N connections, with their parsers and transports, stayed behind once the server closed
        them; made at the peak, they kept whole allocator arenas mapped (docs/benchmarks.md 11d)."""
        while self._idle:
            self._idle.pop().close()

    def _pooled(self, now: float) -> _Connection | None:
        while self._idle and not self._usable(self._idle[0], now):
            self._idle.popleft().close()  # the oldest first: closed by the server, or about to be
        while self._idle:
            conn = self._idle.pop()  # the most recently used: the least likely to have been closed
            if self._usable(conn, now):
                return conn
            conn.close()
        return None

    def _usable(self, conn: _Connection, now: float) -> bool:
        return not conn.closed and now - conn.idle_since < self._keepalive_s

    async def _connect(self, loop: asyncio.AbstractEventLoop, timeout: float) -> _Connection:
        try:
            _, conn = await asyncio.wait_for(
                loop.create_connection(lambda: _Connection(loop), self._host, self._port, ssl=self._ssl),
                timeout,
            )
        except TimeoutError:
            raise ConnectTimeout(f"no connection to {self._host}:{self._port} within {timeout:g} s") from None
        return conn


class EngineClient(Protocol):
    """What a backend needs of an HTTP client: `EngineHTTP`, or `HttpxEngine` with the fast paths off."""

    async def request(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        *,
        timeout: float | None = None,
        sink: Callable[[bytes], None] | None = None,
    ) -> tuple[int, bytes]: ...

    def close(self) -> None: ...

    def close_idle(self) -> None: ...


def engine_client(base_url: str, *, timeout: float, keepalive_s: float = 4.0) -> EngineClient:
    """`EngineHTTP`, or httpx (`HttpxEngine`) when `OPENENV_FAST_PATHS=0` (see `capture/fast_paths.py`)."""
    if fast_paths():
        return EngineHTTP(base_url, timeout=timeout, keepalive_s=keepalive_s)
    return HttpxEngine(base_url, timeout=timeout, keepalive_s=keepalive_s)


class HttpxEngine:
    """`EngineHTTP`'s interface over httpx's `AsyncClient`, the maintained client: slower per call, kept as
    the way back from our own client. Raises the same errors (`ConnectTimeout`, `ReadTimeout`,
    `ServerDisconnected`, `OSError`), so the backend translates them the same way."""

    def __init__(self, base_url: str, *, timeout: float, keepalive_s: float = 4.0) -> None:
        import httpx

        if urlsplit(base_url).scheme not in ("http", "https"):
            raise ValueError(f"not an http(s) URL: {base_url!r}")
        self._httpx = httpx
        self._timeout = timeout
        limits = httpx.Limits(
            keepalive_expiry=keepalive_s or None, max_keepalive_connections=None if keepalive_s else 0
        )
        self._client = httpx.AsyncClient(base_url=base_url.rstrip("/"), timeout=timeout, limits=limits)

    async def request(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        *,
        timeout: float | None = None,
        sink: Callable[[bytes], None] | None = None,
    ) -> tuple[int, bytes]:
        """As `EngineHTTP.request`."""
        httpx = self._httpx
        headers = {"content-type": "application/json"} if body is not None else None
        wait = self._timeout if timeout is None else timeout
        try:
            async with self._client.stream(
                method, path, content=body, headers=headers, timeout=httpx.Timeout(wait)
            ) as reply:
                if sink is not None and reply.status_code == 200:
                    async for piece in reply.aiter_raw():
                        sink(piece)
                    return reply.status_code, b""
                return reply.status_code, await reply.aread()
        except httpx.ConnectTimeout:
            raise ConnectTimeout(f"no connection to {self._client.base_url} within {wait:g} s") from None
        except httpx.TimeoutException:
            raise ReadTimeout(f"no reply byte within {wait:g} s") from None
        except httpx.ConnectError as exc:
            raise ConnectionRefusedError(str(exc)) from None
        except httpx.TransportError as exc:
            raise ServerDisconnected(f"{type(exc).__name__}: {exc}") from None

    def close_idle(self) -> None:
        """Nothing: httpx's pool expires idle connections itself (`keepalive_expiry`)."""

    def close(self) -> None:
        """Close the pooled connections (on the loop the client was used on, when it still runs)."""
        try:
            asyncio.get_running_loop().create_task(self._client.aclose())
        except RuntimeError:  # no loop here: the connections close with the process or the loop
            pass
