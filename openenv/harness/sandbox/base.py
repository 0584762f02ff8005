"""The Sandbox seam: where a harness process runs, with its workspace, limits and a verifier shell.

A sandbox owns one episode's files and processes. Whatever it starts, it must be able to kill, so that
no process outlives the episode (`close()`), whether the harness exited, crashed or hung.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from openenv.errors import BadRequest

__all__ = [
    "HARBOR_DIRS",
    "CommandResult",
    "HarnessProcess",
    "Limits",
    "ProcessStatus",
    "Sandbox",
    "container_relpath",
    "run_to_end",
]

# The folders a Harbor task's scripts expect at these absolute paths, besides the workdir (`/app` by
# default, or the task's WORKDIR). Sandboxes show them there: Docker as real paths, local through
# bind mounts in a private mount namespace, so task scripts run unchanged.
HARBOR_DIRS = ("/tests", "/solution", "/logs/verifier", "/logs/agent")

# running: still going. exited: exit code 0. failed: non-zero exit. crashed: died of a signal we did not
# send. timeout: we killed it at its deadline. killed: we killed it on close while it was still running.
ProcessStatus = Literal["running", "exited", "failed", "crashed", "timeout", "killed"]


class Limits(BaseModel):
    """Resource limits: per process (`resource.setrlimit`), and for the whole sandbox together (a
    cgroup: `pids`, processes and threads; `memory_mb`, resident memory, page cache included)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cpu_seconds: int | None = Field(default=600, description="RLIMIT_CPU")
    file_size_mb: int | None = Field(default=1024, description="RLIMIT_FSIZE")
    open_files: int | None = Field(default=4096, description="RLIMIT_NOFILE")
    core_dumps: bool = False
    # No address-space limit by default: Bun and V8 reserve tens of GB of virtual memory up front.
    address_space_mb: int | None = None
    pids: int | None = Field(default=1024, gt=0, description="processes + threads, sandbox-wide")
    memory_mb: int | None = Field(default=4096, gt=0, description="memory, sandbox-wide")


class CommandResult(BaseModel):
    """The outcome of a short command run to completion (the verifier's tests, a setup step)."""

    model_config = ConfigDict(extra="forbid")

    argv: list[str]
    exit_code: int | None
    output: str = Field(description="stdout and stderr, interleaved as written")
    timed_out: bool = False


@runtime_checkable
class HarnessProcess(Protocol):
    """A long-running process inside a sandbox (the harness)."""

    @property
    def pid(self) -> int: ...

    def status(self) -> ProcessStatus:
        """The current status; never blocks."""
        ...

    def exit_code(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> ProcessStatus:
        """Wait up to `timeout` seconds for the process to end and return its status."""
        ...

    def output_tail(self, chars: int = 2000) -> str:
        """The last `chars` characters of stdout and stderr together."""
        ...

    def kill(self) -> None:
        """Kill the whole process tree (status becomes `killed` if it was running)."""
        ...


@runtime_checkable
class Sandbox(Protocol):
    """Runs one episode's processes over one workspace, and cleans up everything on close."""

    @property
    def workspace(self) -> Path:
        """The task's working tree, as a path this process can read and write."""
        ...

    @property
    def home(self) -> Path:
        """HOME for the harness: config files go here, never into the real home."""
        ...

    def private_dir(self, name: str) -> Path:
        """A fresh folder outside the workspace (hidden tests, rewards), created on first use."""
        ...

    def write_files(self, files: dict[str, str], *, under: Path | None = None) -> None:
        """Write text files, relative to `under` (default: the workspace)."""
        ...

    def read_file(self, relative: str) -> str:
        """Read a workspace file as text."""
        ...

    def start(
        self, argv: list[str], *, env: dict[str, str], timeout_s: float, cwd: str | Path | None = None
    ) -> HarnessProcess:
        """Start a long-running process; it is killed at `timeout_s` and on close."""
        ...

    def run(
        self,
        argv: list[str],
        *,
        env: dict[str, str] | None = None,
        timeout_s: float = 120,
        cwd: str | Path | None = None,
    ) -> CommandResult:
        """Run a command to completion (or its timeout) and capture its output. `cwd` is a container
        path (default: the workdir)."""
        ...

    def leftover_pids(self) -> list[int]:
        """Live processes this sandbox started (or their descendants); empty after close."""
        ...

    # ---- Harbor paths and the agent/verifier split ----------------------------------------------------

    @property
    def workdir(self) -> str:
        """The container path where the agent works (`/app`, or the task's WORKDIR)."""
        ...

    def host_path(self, container_path: str) -> Path:
        """Where `container_path` (the workdir, a `HARBOR_DIRS` folder, or a path under one) lives on
        this host, for reading rewards and logs after the processes are gone.

        Raises:
            BadRequest: the path is not under one of the sandbox's folders, or escapes it with `..`.
        """
        ...

    def stage(self, container_path: str, files: dict[str, bytes | str], *, readonly: bool = True) -> None:
        """Put `files` (relative path -> content) under `container_path`, e.g. the tests into `/tests`
        after `end_agent()`, or the solution into `/solution` for the oracle. `readonly` files cannot be
        changed by the sandbox's processes."""
        ...

    def fresh_dir(self, container_path: str) -> Path:
        """Empty and recreate `container_path` (the reward folder, only after `end_agent()`), so that
        nothing the agent planted there survives; returns its host path."""
        ...

    def fresh_home(self) -> str:
        """An empty folder (with `tmp/` below it) that no agent process ever saw, for the verifier's HOME and
        TMPDIR (only after `end_agent()`); returns its path inside the sandbox."""
        ...

    def end_agent(self) -> None:
        """Kill every process started so far (the harness and all it spawned, daemons included) and
        return only when they are gone; idempotent. The sandbox stays usable for grading, but no
        longer reaches the proxy ports it was made with: those were the agent's."""
        ...

    def close(self) -> None:
        """Kill every process and remove the sandbox's files; safe to call twice."""
        ...


def container_relpath(container_path: str, roots: tuple[str, ...]) -> tuple[str, PurePosixPath]:
    """Split an absolute container path into (the root it lies under, the path below it).

    Raises:
        BadRequest: the path is relative, contains `..` or a NUL, or lies under none of `roots`.
    """
    path = PurePosixPath(container_path)
    if not path.is_absolute() or ".." in path.parts or "\x00" in container_path:
        raise BadRequest(f"container path must be absolute without '..': {container_path!r}")
    for root in sorted(roots, key=len, reverse=True):
        if path == PurePosixPath(root) or PurePosixPath(root) in path.parents:
            return root, path.relative_to(root)
    raise BadRequest(f"{container_path!r} is not under a sandbox folder ({', '.join(sorted(roots))})")


def run_to_end(process: HarnessProcess, argv: list[str], timeout_s: float) -> CommandResult:
    """What `Sandbox.run` reports: wait for `process` (10 s of grace past its own deadline, at which the
    sandbox kills it), kill whatever is left, and collect the exit code and the output's tail."""
    status = process.wait(timeout_s + 10)
    process.kill()
    return CommandResult(
        argv=argv,
        exit_code=process.exit_code(),
        output=process.output_tail(200_000),
        timed_out=status == "timeout",
    )
