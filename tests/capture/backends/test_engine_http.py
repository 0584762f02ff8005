"""`EngineHTTP` against real loopback servers: a scripted raw-socket server for the wire cases aiohttp
would never produce (a pooled connection dropped by the server, a close mid-reply, chunked replies),
and an aiohttp server for ordinary keep-alive. Nothing is mocked."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
import pytest_asyncio
from aiohttp import web

from openenv.capture.backends.engine_http import EngineHTTP, ReadTimeout, ServerDisconnected, _Connection
from openenv.core.net import free_port

# A handler gets (request number on this connection, the request's raw head+body, the writer) and
# writes whatever it likes; returning False closes the connection.
Script = Callable[[int, bytes, asyncio.StreamWriter], Awaitable[bool]]


def reply(body: bytes, *, close: bool = False) -> bytes:
    extra = b"Connection: close\r\n" if close else b""
    return b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%s\r\n%s" % (
        len(body),
        extra,
        body,
    )


class RawServer:
    """A loopback HTTP/1.1 server run by a script; counts connections and requests."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.connections = 0
        self.requests: list[bytes] = []
        self.server: asyncio.Server | None = None
        self.url = ""

    async def start(self) -> RawServer:
        port = free_port()
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", port)
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        n = 0
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                request = head + await reader.readexactly(length)
                self.requests.append(request)
                if not await self.script(n, request, writer):
                    break
                await writer.drain()
                n += 1
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def stop(self) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()


@pytest_asyncio.fixture(loop_scope="function")
async def serve() -> AsyncIterator[Callable[[Script], Awaitable[RawServer]]]:
    servers: list[RawServer] = []

    async def start(script: Script) -> RawServer:
        servers.append(await RawServer(script).start())
        return servers[-1]

    yield start
    for server in servers:
        await server.stop()


async def echo_count(n: int, request: bytes, writer: asyncio.StreamWriter) -> bool:
    writer.write(reply(b'{"n": %d}' % n))
    return True


async def test_requests_share_one_keep_alive_connection_and_send_json(serve: Any) -> None:
    server = await serve(echo_count)
    http = EngineHTTP(server.url, timeout=5)
    answers = [await http.request("POST", "/v1/completions", b'{"prompt": [1, 2]}') for _ in range(3)]
    assert answers == [(200, b'{"n": 0}'), (200, b'{"n": 1}'), (200, b'{"n": 2}')]
    assert server.connections == 1
    first = server.requests[0]
    assert first.startswith(b"POST /v1/completions HTTP/1.1\r\n") and first.endswith(
        b'\r\n\r\n{"prompt": [1, 2]}'
    )
    assert b"Content-Type: application/json\r\n" in first and b"Content-Length: 18\r\n" in first
    http.close()


async def test_concurrent_requests_each_get_their_own_reply(serve: Any) -> None:
    async def slow_echo(n: int, request: bytes, writer: asyncio.StreamWriter) -> bool:
        body = request.split(b"\r\n\r\n", 1)[1]
        await asyncio.sleep(0.05 if b'"a"' in body else 0.0)
        writer.write(reply(body))
        return True

    server = await serve(slow_echo)
    http = EngineHTTP(server.url, timeout=5)
    bodies = [b'"a"', b'"b"', b'"c"', b'"a"']
    answers = await asyncio.gather(*(http.request("POST", "/x", body) for body in bodies))
    assert [body for _, body in answers] == bodies
    assert server.connections == 4  # one request in flight per connection: no pipelining
    assert await http.request("POST", "/x", b'"d"') == (200, b'"d"') and server.connections == 4
    http.close()


async def test_close_idle_lets_go_of_a_peaks_connections_and_the_client_keeps_working(serve: Any) -> None:
    """A pool drops a connection only when a later request passes it: after a peak of concurrent turns
    and no request since, every connection of the peak (parser, transport, buffers) stayed alive, even
    once the server had closed it. `close_idle` is what the proxy calls once idle."""

    async def slow_echo(n: int, request: bytes, writer: asyncio.StreamWriter) -> bool:
        await asyncio.sleep(0.05)
        writer.write(reply(request.split(b"\r\n\r\n", 1)[1]))
        return True

    def alive() -> int:
        gc.collect()
        return sum(1 for o in gc.get_objects() if type(o) is _Connection)

    server = await serve(slow_echo)
    http = EngineHTTP(server.url, timeout=5)
    await asyncio.gather(*(http.request("POST", "/x", b"%d" % i) for i in range(20)))
    assert server.connections == 20 and alive() == 20
    await server.stop()  # the engine closes its side: the pool still holds all 20
    await asyncio.sleep(0.05)
    assert alive() == 20
    http.close_idle()
    await asyncio.sleep(0.05)  # the transports let go of their protocols on the next iterations
    assert alive() == 0
    again = await serve(echo_count)
    http2 = EngineHTTP(again.url, timeout=5)
    http2.close_idle()  # nothing pooled yet: a no-op
    assert await http2.request("POST", "/x", b"1") == (200, b'{"n": 0}')
    http2.close_idle()
    assert await http2.request("POST", "/x", b"1") == (200, b'{"n": 0}')  # a new connection
    assert again.connections == 2
    http2.close()


async def test_a_pooled_connection_the_server_dropped_is_retried_on_a_new_one(serve: Any) -> None:
    """The keep-alive race: the server closes an idle connection just as the client reuses it. The
    request was never answered, so it is sent again on a fresh connection, once."""

    async def drop_the_second(n: int, request: bytes, writer: asyncio.StreamWriter) -> bool:
        if n == 1:
            return False  # read the request, close without a byte of reply
        writer.write(reply(b'{"ok": %d}' % n))
        return True

    server = await serve(drop_the_second)
    http = EngineHTTP(server.url, timeout=5)
    assert await http.request("POST", "/x", b"{}") == (200, b'{"ok": 0}')
    assert await http.request("POST", "/x", b"{}") == (200, b'{"ok": 0}')  # first of the new connection
    assert server.connections == 2 and len(server.requests) == 3
    http.close()


async def test_a_new_connection_closed_before_the_reply_is_not_retried(serve: Any) -> None:
    async def drop(n: int, request: bytes, writer: asyncio.StreamWriter) -> bool:
        return False

    server = await serve(drop)
    with pytest.raises(ServerDisconnected):
        await EngineHTTP(server.url, timeout=5).request("POST", "/x", b"{}")
    assert len(server.requests) == 1


async def test_a_reply_cut_off_midway_is_a_disconnect_and_not_retried(serve: Any) -> None:
    async def cut(n: int, request: bytes, writer: asyncio.StreamWriter) -> bool:
        if n == 1:
            writer.write(reply(b'{"long": "reply"}')[:-5])
            await writer.drain()
            return False
        writer.write(reply(b"{}"))
        return True

    server = await serve(cut)
    http = EngineHTTP(server.url, timeout=5)
    await http.request("POST", "/x", b"{}")
    with pytest.raises(ServerDisconnected):
        await http.request("POST", "/x", b"{}")
    assert len(server.requests) == 2


async def test_a_silent_server_is_a_read_timeout_and_its_connection_is_dropped(serve: Any) -> None:
    async def silent_once(n: int, request: bytes, writer: asyncio.StreamWriter) -> bool:
        if b"silent" in request:
            await asyncio.sleep(1.0)
            writer.write(reply(b'"late"'))
        else:
            writer.write(reply(b'"on time"'))
        return True

    server = await serve(silent_once)
    http = EngineHTTP(server.url, timeout=0.2)
    with pytest.raises(ReadTimeout, match="no byte of the reply for 0.2 s"):
        await http.request("POST", "/x", b'"silent"')
    # never the late reply; and no 0.2 s clock on this healthy request (a stalled test process would trip it)
    assert await http.request("POST", "/x", b'"fine"', timeout=30) == (200, b'"on time"')
    assert server.connections == 2
    http.close()


async def test_a_cancelled_request_leaves_no_connection_to_read_its_late_reply(serve: Any) -> None:
    async def late_first(n: int, request: bytes, writer: asyncio.StreamWriter) -> bool:
        if b"first" in request:
            await asyncio.sleep(0.3)
        writer.write(reply(request.split(b"\r\n\r\n", 1)[1]))
        return True

    server = await serve(late_first)
    http = EngineHTTP(server.url, timeout=5)
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(http.request("POST", "/x", b'"first"'), 0.05)
    assert await http.request("POST", "/x", b'"second"') == (200, b'"second"')
    http.close()


async def test_chunked_and_connection_close_replies(serve: Any) -> None:
    async def chunked_then_close(n: int, request: bytes, writer: asyncio.StreamWriter) -> bool:
        if n == 0:
            writer.write(
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                b'4\r\n{"a"\r\n3\r\n: 1\r\n1\r\n}\r\n0\r\n\r\n'
            )
            return True
        writer.write(reply(b'"bye"', close=True))
        await writer.drain()
        return True  # the client, told to close, must not reuse it

    server = await serve(chunked_then_close)
    http = EngineHTTP(server.url, timeout=5)
    assert await http.request("GET", "/v1/models") == (200, b'{"a": 1}')
    assert await http.request("GET", "/v1/models") == (200, b'"bye"')
    assert await http.request("GET", "/v1/models") == (200, b'{"a": 1}')
    assert server.connections == 2
    assert (
        server.requests[0].startswith(b"GET /v1/models HTTP/1.1\r\n")
        and b"Content-Length" not in server.requests[0]
    )
    http.close()


async def test_a_path_prefix_and_a_real_aiohttp_server() -> None:
    async def handler(request: web.Request) -> web.Response:
        return web.json_response({"path": request.path, "body": await request.json()})

    app = web.Application()
    app.router.add_post("/{tail:.*}", handler)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        http = EngineHTTP(f"http://127.0.0.1:{port}/engine/", timeout=5)
        for _ in range(2):
            status, body = await http.request("POST", "/v1/completions", b'{"prompt": [7]}')
            assert (status, body) == (200, b'{"path": "/engine/v1/completions", "body": {"prompt": [7]}}')
        http.close()
    finally:
        await runner.cleanup()


async def test_an_ipv6_origin_is_reached_and_named_in_brackets() -> None:
    seen: list[bytes] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.append(await reader.readuntil(b"\r\n\r\n"))
        writer.write(reply(b"{}"))
        await writer.drain()
        writer.close()

    port = free_port()
    try:
        server = await asyncio.start_server(serve, "::1", port)
    except OSError:
        pytest.skip("this machine has no IPv6 loopback")
    async with server:
        assert await EngineHTTP(f"http://[::1]:{port}", timeout=5).request("GET", "/v1/models") == (
            200,
            b"{}",
        )
    assert f"Host: [::1]:{port}\r\n".encode() in seen[0]


def test_only_http_urls_are_taken() -> None:
    with pytest.raises(ValueError, match="not an http"):
        EngineHTTP("ftp://127.0.0.1:1", timeout=1)
