"""Docker-sandbox fixtures: the engine (skipped with the reason when none answers), a stand-in proxy,
a sandbox per test, and the seam that runs HarnessEnvironment episodes in Docker.

The offline base image is built on first use by scripts/build_base_image.sh (cached by its recipe).
"""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import docker
import pytest

from openenv.core.net import free_port
from openenv.harness.environment import EpisodeHooks
from openenv.harness.sandbox.docker import ContainerLimits, DockerSandbox, engine_available
from openenv.harness.sandbox.docker_episode import sandbox_factory, verify_isolated
from openenv.harness.sandbox.sweeper import KIND_LABEL

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="session")
def client() -> Iterator[docker.DockerClient]:
    """A Docker SDK client on a live engine with the offline base image built."""
    reason = engine_available()
    if reason is not None:
        pytest.skip(reason)
    subprocess.run(["bash", str(REPO / "scripts" / "build_base_image.sh")], check=True)
    engine = docker.from_env()
    yield engine
    engine.close()


@pytest.fixture
def ours(client: docker.DockerClient) -> Callable[[], list[str]]:
    """Short ids of every container carrying the openenv sandbox label (live or not)."""
    return lambda: [
        c.short_id for c in client.containers.list(all=True, sparse=True, filters={"label": KIND_LABEL})
    ]


class _Hello(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"proxy says hi"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def _serve() -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(("127.0.0.1", free_port()), _Hello)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture(scope="session")
def proxy_port() -> Iterator[int]:
    """A real HTTP server on this host's loopback, standing in for the capture proxy (forwarded in)."""
    server = _serve()
    yield server.server_address[1]
    server.shutdown()


@pytest.fixture
def host_only_port() -> Iterator[int]:
    """Another real HTTP server on this host's loopback that is *not* forwarded into sandboxes."""
    server = _serve()
    yield server.server_address[1]
    server.shutdown()


@pytest.fixture
def sandbox(client: docker.DockerClient, proxy_port: int) -> Iterator[DockerSandbox]:
    box = DockerSandbox(
        forward_ports=(proxy_port,),
        client=client,
        container_limits=ContainerLimits(cpus=1.5, memory_mb=768, pids=256),
    )
    yield box
    box.close()


@pytest.fixture
def docker_episodes(client: docker.DockerClient) -> EpisodeHooks:
    """HarnessEnvironment hooks that run each episode in DockerSandbox and grade it in a fresh one."""
    return EpisodeHooks(sandbox_factory=sandbox_factory(client=client), verifier=verify_isolated)
