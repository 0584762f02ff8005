"""The images, built here with no registry (FROM openenv/python, scripts/build_python_image.sh) and run on a
real Docker engine: the root Dockerfile serves the echo env and passes `openenv validate --url`;
`openenv build pi` makes the harness env image. (The pi Space: tests/test_space.py.)

Containers publish their port on 127.0.0.1 only. The harness container reaches the engine (the session's
vLLM on the host's loopback) the way Docker sandboxes reach the proxy: a unix socket mounted from the host
(`UnixToTcpBridge`) and the stdlib forwarder inside listening on the container's own 127.0.0.1; no
traffic goes to docker0. It gets CAP_SYS_ADMIN and CAP_NET_ADMIN (no seccomp/AppArmor profile) so bubblewrap
can wall the harness in inside the container and bring up the loopback of its network namespace.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from openenv.core.net import free_port, wait_for_health
from openenv.errors import TransportError
from openenv.harness.catalog import get_spec
from openenv.harness.env_image import env_image_tag
from openenv.harness.install import install_status
from openenv.harness.sandbox.docker import engine_available

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
PYTHON_IMAGE = "openenv/python:latest"
TASK = "fix-temperature-conversion"
LABELS = {"openenv.test": "images"}


@pytest.fixture(scope="module")
def docker_client() -> Any:
    if (reason := engine_available()) is not None:
        pytest.skip(f"{reason}; run scripts/install.sh --all")
    import docker

    subprocess.run(["bash", str(REPO / "scripts" / "build_python_image.sh")], check=True)
    return docker.from_env()


@pytest.fixture
def images(docker_client: Any) -> Iterator[list[str]]:
    """Tags a test builds; removed afterwards (only ours: the shared engine keeps everyone else's)."""
    made: list[str] = []
    yield made
    import docker.errors

    for tag in made:
        with contextlib.suppress(docker.errors.APIError):  # already gone, or still used by a container
            docker_client.images.remove(tag, noprune=False)


def _build(client: Any, context: Path, tag: str) -> None:
    import docker.errors

    try:
        client.images.build(
            path=str(context),
            tag=tag,
            buildargs={"BASE_IMAGE": PYTHON_IMAGE},
            network_mode="none",
            rm=True,
            labels=LABELS,
        )
    except docker.errors.BuildError as exc:
        log = "".join(str(line.get("stream", line.get("error", ""))) for line in exc.build_log)
        pytest.fail(f"building {context} failed: {exc.msg}\n{log[-3000:]}")


def _wait_healthy(url: str, container: Any, timeout_s: float = 120) -> None:
    def gone() -> str | None:
        container.reload()
        return None if container.status in ("created", "running") else f"the container is {container.status}"

    try:
        wait_for_health(url, timeout_s=timeout_s, gone=gone, interval_s=0.3)
    except TransportError as exc:
        pytest.fail(f"{exc}\n{container.logs(tail=30).decode(errors='replace')}")


def _validate(url: str, token: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "openenv.cli.main", "validate", "--url", url],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "OPENENV_TOKEN": token, "COLUMNS": "200"},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_the_root_dockerfile_builds_offline_and_passes_validate(
    docker_client: Any, images: list[str]
) -> None:
    tag = f"openenv-test/root:{uuid.uuid4().hex[:8]}"
    _build(docker_client, REPO, tag)
    images.append(tag)
    port, token = free_port(), secrets.token_urlsafe(16)
    container = docker_client.containers.run(
        tag,
        detach=True,
        remove=True,
        labels=LABELS,
        ports={"8000/tcp": ("127.0.0.1", port)},
        environment={"OPENENV_TOKEN": token},
    )
    try:
        _wait_healthy(f"http://127.0.0.1:{port}", container)
        assert "all 4 checks passed" in _validate(f"http://127.0.0.1:{port}", token)
    finally:
        container.stop(timeout=5)


def test_openenv_build_makes_the_pi_env_image(docker_client: Any) -> None:
    """The env image (bubblewrap inside: run with the capabilities the module docstring names). The pi
    Space, which runs with none, is tests/test_space.py."""
    spec = get_spec("pi")
    if not install_status(spec).ready:
        pytest.skip("pi is not installed; run scripts/install.sh --all")
    built = subprocess.run(
        [sys.executable, "-m", "openenv.cli.main", "build", "pi"], capture_output=True, text=True, check=False
    )
    assert built.returncode == 0, built.stdout + built.stderr  # the tag stays: it is the product's image
    config = docker_client.images.get(env_image_tag(spec)).attrs["Config"]
    assert config["Labels"]["openenv.harness"] == "pi" and config["Labels"]["openenv.kind"] == "env"
    assert "OPENENV_BACKEND=vllm" in config["Env"] and config["Cmd"][:3] == ["openenv", "serve", "pi"]
