"""One real two-node Ray cluster per test session, in a private loopback-only network namespace.

Head on 127.0.0.1, worker node on 127.0.0.2, one episode slot each; the session's vLLM server is carried
into the namespace on the same port (a forwarder, not a second 1.8 GB server). Drivers run inside
through `cluster.run(...)`.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from urllib.parse import urlparse

import pytest

from openenv.testing.ray_cluster import LoopbackRayCluster, cluster_unavailable


@pytest.fixture(scope="session")
def ray_cluster(vllm_url: str) -> Iterator[LoopbackRayCluster]:
    reason = cluster_unavailable()
    if reason:
        pytest.skip(f"{reason} (scripts/install.sh installs the ray extra)")
    port = urlparse(vllm_url).port
    assert port is not None
    begin = time.monotonic()
    cluster = LoopbackRayCluster(workers=1, slots=1, forward={port: port}).start()
    print(f"\n[ray cluster] 2 nodes up in {time.monotonic() - begin:.1f} s, {cluster.memory_mb()} MB RSS")
    try:
        yield cluster
    finally:
        cluster.stop()
