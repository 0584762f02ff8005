"""The Docker engine as the Docker sandboxes see it: is one there, which image and uid by default, the
container-wide limits, and its SDK's errors turned into ours.

Apart from `docker.py` so the modules that only ask whether an engine answers (the CLI, preflight, the
Harbor server) or build a container's limits need not read the sandbox itself; `docker.py` re-exports
every public name here.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import docker
import docker.errors
from docker.types import Ulimit
from pydantic import BaseModel, ConfigDict, Field

from openenv.errors import EnvError, SandboxLost
from openenv.harness.sandbox.base import Limits

__all__ = [
    "DEFAULT_IMAGE",
    "DEFAULT_USER",
    "DOCKER_UID",
    "IMAGE_PATH",
    "ContainerLimits",
    "engine_available",
    "engine_errors",
    "ulimits",
]

DEFAULT_IMAGE = os.environ.get("OPENENV_SANDBOX_IMAGE", "openenv/base:latest")
IMAGE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# The agent's uid in the container: no host account may have it (uid 1000 was a real user here).
DOCKER_UID = int(os.environ.get("OPENENV_DOCKER_UID", "61001"))
DEFAULT_USER = f"{DOCKER_UID}:{DOCKER_UID}"


class ContainerLimits(BaseModel):
    """Container-wide limits enforced by the engine's cgroups (on top of the per-process `Limits`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cpus: float = Field(default=2.0, gt=0)
    memory_mb: int = Field(default=4096, gt=0, description="memory and memory+swap: no swap")
    pids: int = Field(default=1024, gt=0)
    tmpfs_mb: int = Field(default=512, gt=0, description="size of the in-memory /tmp")


@contextlib.contextmanager
def engine_errors(what: str) -> Iterator[None]:
    """Translate Docker SDK errors into ours, once, naming what we were doing."""
    try:
        yield
    except docker.errors.NotFound as exc:
        raise SandboxLost(f"sandbox lost while trying to {what}: {exc.explanation or exc}") from exc
    except docker.errors.DockerException as exc:
        raise EnvError(f"Docker failed while trying to {what}: {exc}") from exc


def engine_available() -> str | None:
    """None when a Docker engine answers, else the reason (for test skips and `openenv build`)."""
    try:
        client = docker.from_env(timeout=5)
        client.ping()
        client.close()
        return None
    except docker.errors.DockerException as exc:
        return f"no Docker engine answers ({exc}); run scripts/install_docker.sh as root"


def ulimits(limits: Limits) -> list[Ulimit]:
    """The per-process `Limits` as the engine's ulimits (unset fields are left to the image)."""
    pairs = {
        "cpu": limits.cpu_seconds,
        "fsize": None if limits.file_size_mb is None else limits.file_size_mb << 20,
        "nofile": limits.open_files,
        "core": None if limits.core_dumps else 0,
        "as": None if limits.address_space_mb is None else limits.address_space_mb << 20,
    }
    return [Ulimit(name=name, soft=value, hard=value) for name, value in pairs.items() if value is not None]
