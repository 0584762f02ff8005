"""The env-server benchmark's load generator counts failed requests instead of dying on the first one.

At 256 clients a server that refuses some (a session cap, a full accept queue) must show up as a
`failed` count in its row, with the rest of the run measured: before, one non-200 reply ended the
whole benchmark with SystemExit and the sweep said nothing about the other servers.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

_TOKEN = os.environ.get("OPENENV_TOKEN")
import bench_server  # noqa: E402

# The script gives its served children a token through the environment it imports into; in this test
# process that would leak into every later test (`openenv serve --no-token` then saw a token and refused).
if _TOKEN is None:
    os.environ.pop("OPENENV_TOKEN", None)


async def _refusing_every_other_step(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """A keep-alive HTTP/1.1 server: 200 to /reset and to odd steps, 503 to even steps."""
    steps = 0
    while True:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            int(line.split(b":")[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length")
        )
        await reader.readexactly(length)
        if head.startswith(b"POST /step"):
            steps += 1
        status = b"503 Service Unavailable" if steps and steps % 2 == 0 else b"200 OK"
        body = b'{"session_id": "s1", "observation": {}}'
        writer.write(b"HTTP/1.1 " + status + b"\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        await writer.drain()
        if head.startswith(b"DELETE"):
            writer.close()
            return


def test_http_client_counts_refused_steps_and_keeps_measuring() -> None:
    async def scenario() -> bench_server.Tally:
        server = await asyncio.start_server(_refusing_every_other_step, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        now = time.time()
        window = bench_server.Window(now, now + 0.3)
        async with server:
            return await bench_server.http_client(f"http://127.0.0.1:{port}", window, stateful=True)

    tally = asyncio.run(scenario())
    assert tally.failed > 0
    assert tally.ops > 0
    assert abs(tally.failed - tally.ops) <= 1  # every other step refused, every other counted
    assert len(tally.latencies) == tally.ops


def test_a_refused_connection_is_a_failure_not_a_crash() -> None:
    async def scenario() -> bench_server.Tally:
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        server.close()
        await server.wait_closed()  # nothing listens on the port now
        now = time.time()
        return await bench_server.ws_client(f"http://127.0.0.1:{port}", bench_server.Window(now, now + 0.2))

    tally = asyncio.run(scenario())
    assert tally.failed >= 1
    assert tally.ops == 0
