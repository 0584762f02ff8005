"""One real two-node Ray cluster per test session, in a private loopback-only network namespace.

Head on 127.0.0.1, worker node on 127.0.0.2, one episode slot each; the session's vLLM server is carried
into the namespace on the same port (a forwarder, not a second 1.8 GB server). Drivers run inside
through `cluster.run(...)`. The worker node does not see one harness install (`MISSING_ON_ONE_NODE`).
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

import pytest

from openenv.harness.catalog import get_spec
from openenv.harness.install import prefix
from openenv.testing.ray_cluster import LoopbackRayCluster, cluster_unavailable

# Installed here, hidden from the worker node only (no cluster test runs it): a node that lacks one CLI.
MISSING_ON_ONE_NODE = "opencode"


@pytest.fixture(scope="session")
def ray_cluster(vllm_url: str) -> Iterator[LoopbackRayCluster]:
    reason = cluster_unavailable()
    if reason:
        pytest.skip(f"{reason} (scripts/install.sh installs the ray extra)")
    port = urlparse(vllm_url).port
    assert port is not None
    begin = time.monotonic()
    cluster = LoopbackRayCluster(
        workers=1,
        slots=1,
        forward={port: port},
        hide={"127.0.0.2": [str(prefix(get_spec(MISSING_ON_ONE_NODE)))]},
    ).start()
    print(f"\n[ray cluster] 2 nodes up in {time.monotonic() - begin:.1f} s, {cluster.memory_mb()} MB RSS")
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def docker_base_image() -> str:
    """A live Docker engine with the offline sandbox image built (scripts/build_base_image.sh, cached)."""
    from openenv.harness.sandbox.docker import DEFAULT_IMAGE, engine_available

    reason = engine_available()
    if reason is not None:
        pytest.skip(reason)
    subprocess.run(
        ["bash", str(Path(__file__).resolve().parents[2] / "scripts" / "build_base_image.sh")], check=True
    )
    return DEFAULT_IMAGE
