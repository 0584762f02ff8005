"""ContainerSandbox: the harness as a plain subprocess, with the container it runs in as the boundary.

For a platform that runs our image but grants no privilege, a Hugging Face Space among them: a non-root
user (uid 1000), no capabilities, the default seccomp profile (no `unshare`, no new namespaces, so no
bubblewrap), a read-only root filesystem with only `/tmp` and `/data` writable. What the local sandbox
gets from bubblewrap is given up here (docs/security.md, "The container sandbox"): the harness runs as the
server's own user, sees the server's files and processes, and reaches every network the container does.
What stays: its own HOME and TMPDIR, the environment allow-list, rlimits, the kill of every process it
started (by marker) before grading, and the Harbor paths where task scripts expect them.

The Harbor paths are real: the image links `/app`, `/tests`, `/solution` and `/logs` into
`/tmp/openenv-harbor/` (the Space Dockerfile makes the links, `OPENENV_CONTAINER_HARBOR` moves the
folder), so `cd /app` and `/logs/verifier/reward.json` work unchanged on a read-only root. They exist once
per container, so the container runs one episode at a time (a lock; a second sandbox is refused).

Outside a container this mode would run the harness on the host with no boundary: it is refused unless
the caller opts in (`allow_outside_container=True`, or `OPENENV_SANDBOX_OUTSIDE_CONTAINER=1`).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
from pathlib import Path

from openenv.errors import EnvError
from openenv.harness.sandbox.base import HARBOR_DIRS, Limits
from openenv.harness.sandbox.local import DEFAULT_ENV_ALLOW, LocalSandbox
from openenv.settings import flag

__all__ = [
    "CONTAINER_MARKER",
    "HARBOR_ENV",
    "OUTSIDE_ENV",
    "ContainerSandbox",
    "container_evidence",
    "harbor_root",
]

HARBOR_ENV = "OPENENV_CONTAINER_HARBOR"
OUTSIDE_ENV = "OPENENV_SANDBOX_OUTSIDE_CONTAINER"
# Written by the Space Dockerfile: this filesystem is an image whose container is the boundary.
CONTAINER_MARKER = "/etc/openenv-container"
_LINKED = ("/app", "/tests", "/solution", "/logs")  # /logs holds /logs/verifier and /logs/agent
_EVIDENCE_FILES = (CONTAINER_MARKER, "/.dockerenv", "/run/.containerenv")
_PID1_CGROUP = "/proc/1/cgroup"


def harbor_root() -> Path:
    """Where the linked Harbor folders live (a writable place: `/tmp` on a read-only root)."""
    return Path(os.environ.get(HARBOR_ENV, "/tmp/openenv-harbor"))


def container_evidence() -> str | None:
    """Why we believe this process runs in a container, or None: our image's marker, Docker's
    `/.dockerenv`, Podman's `/run/.containerenv`, or a container runtime named in PID 1's cgroup."""
    for path in _EVIDENCE_FILES:
        if os.path.exists(path):
            return path
    with contextlib.suppress(OSError):
        cgroup = Path(_PID1_CGROUP).read_text()
        for runtime in ("docker", "kubepods", "containerd", "libpod"):
            if runtime in cgroup:
                return f"{_PID1_CGROUP} ({runtime})"
    return None


class ContainerSandbox(LocalSandbox):
    """One episode in this container, as a plain subprocess (see the module docstring for what that gives up).

    Args:
        limits: rlimits for every process (the sandbox-wide pids/memory limits need a cgroup, which a
            container with a read-only /sys/fs/cgroup does not give: the container bounds them).
        env_allow: names passed through from this process's environment.
        forward_ports: the proxy's ports (reached directly: the harness shares the container's network).
        workdir: the task's workdir; only `/app`, the one the image links, is available.
        allow_outside_container: run even where no container is detected (no boundary at all).

    Raises:
        EnvError: no container detected and no opt-in; the Harbor links are missing; another episode
            holds this container's Harbor folders.
    """

    def __init__(
        self,
        *,
        limits: Limits | None = None,
        env_allow: tuple[str, ...] = DEFAULT_ENV_ALLOW,
        forward_ports: tuple[int, ...] = (),
        workdir: str = "/app",
        allow_outside_container: bool | None = None,
    ) -> None:
        if allow_outside_container is None:
            allow_outside_container = flag(OUTSIDE_ENV)
        if container_evidence() is None and not allow_outside_container:
            raise EnvError(
                "the container sandbox runs the harness with no boundary of its own (no bubblewrap): it is "
                f"meant for a container that is the boundary, and none is detected here ({CONTAINER_MARKER}, "
                "/.dockerenv, /run/.containerenv, PID 1's cgroup); use the default bwrap isolation, or opt in "
                f"with {OUTSIDE_ENV}=1 (ContainerSandbox(allow_outside_container=True)) knowing the harness "
                "then runs on this machine as you"
            )
        self._harbor = harbor_root()
        self._lock_fd: int | None = None
        if workdir != "/app":
            raise EnvError(
                f"the container sandbox offers the workdir /app only (linked into {self._harbor}); "
                f"this task wants {workdir!r}: run it with the Docker sandbox"
            )
        bad = [p for p in _LINKED if Path(p).resolve() != (self._harbor / p.lstrip("/")).resolve()]
        if bad:
            raise EnvError(
                f"the container sandbox needs {', '.join(bad)} linked into {self._harbor} (the Space "
                f"image does: ln -s {self._harbor}/app /app, and so on); they are not here"
            )
        self._lock()
        for folder in _LINKED:
            target = self._harbor / folder.lstrip("/")
            shutil.rmtree(target, ignore_errors=True)  # the last episode's leftovers, whoever left them
        (self._harbor / "app").mkdir(parents=True)
        try:
            super().__init__(
                limits=limits,
                env_allow=env_allow,
                network="host",
                forward_ports=forward_ports,
                workdir=workdir,
                isolation="none",
            )
        except BaseException:
            self._release()
            raise

    def _lock(self) -> None:
        self._harbor.mkdir(parents=True, exist_ok=True)
        fd = os.open(self._harbor / ".lock", os.O_CREAT | os.O_RDWR, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise EnvError(
                "the container sandbox runs one episode at a time (the Harbor paths exist once per "
                "container) and another episode is running here; retry when it ends"
            ) from None
        self._lock_fd = fd

    def _roots(self) -> dict[str, Path]:
        return {self._workdir: self._harbor / "app", **{c: self._harbor / c.lstrip("/") for c in HARBOR_DIRS}}

    @property
    def workspace(self) -> Path:
        return self._harbor / "app"

    def stage(self, container_path: str, files: dict[str, bytes | str], *, readonly: bool = True) -> None:
        """As the local sandbox, but "read-only" can only mean file modes: the harness runs as our own
        uid and could change them back (docs/security.md says what follows for grading)."""
        super().stage(container_path, files, readonly=readonly)
        if readonly:
            base = self.host_path(container_path)
            for rel in files:
                with contextlib.suppress(OSError):
                    (base / rel).chmod(0o444)

    def _warnings(self) -> list[str]:
        return [
            (
                "isolation='container': the container is the only boundary; the harness runs as this server's "
                "user, sees its files and processes, and reaches every network the container reaches"
            )
        ]

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._release()

    def _release(self) -> None:
        if self._lock_fd is not None:
            for folder in _LINKED:
                shutil.rmtree(self._harbor / folder.lstrip("/"), ignore_errors=True)
            os.close(self._lock_fd)
            self._lock_fd = None
