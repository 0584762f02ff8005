"""WarmPool on a real engine: started sandboxes handed out, refilled behind them, all removed on close."""

from __future__ import annotations

import time
from collections.abc import Callable

import docker

from openenv.harness.sandbox.pool import WarmPool


def test_a_warm_pool_hands_out_started_sandboxes_and_refills_behind_them(
    client: docker.DockerClient, proxy_port: int, ours: Callable[[], list[str]]
) -> None:
    with WarmPool(size=2, forward_ports=(proxy_port,), client=client) as pool:
        deadline = time.monotonic() + 30
        while pool.waiting < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert pool.waiting == 2
        first, second = pool.take(), pool.take()
        assert first.container.id != second.container.id
        for box in (first, second):
            fetch = f"import urllib.request as u; print(u.urlopen('http://127.0.0.1:{proxy_port}/').read())"
            assert box.run(["python3", "-c", fetch]).output == "b'proxy says hi'\n"
            box.close()
        while pool.waiting < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert pool.waiting == 2 and pool.errors == []
    assert ours() == []
