"""The processes of a local sandbox: each one started (`LocalProcess`), found again by its marker variable
(`sandboxed_processes`) and ended with all its descendants (`kill_tree`)."""

from __future__ import annotations

import contextlib
import os
import select
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import psutil

from openenv.harness.sandbox.base import Limits, ProcessStatus
from openenv.harness.sandbox.cgroup import member_pids

__all__ = [
    "MARKER",
    "confine",
    "LocalProcess",
    "alive",
    "kill_tree",
    "marked_processes",
    "owner_prefix",
    "sandboxed_processes",
]

MARKER = "OPENENV_SANDBOX"


def confine(limits: Limits, cgroup_procs: list[Path]) -> list[str]:
    """The command line that a sandbox's command runs under, first: a `/bin/sh` that joins the sandbox's
    cgroups (nothing it execs or forks later escapes them) and sets the rlimits, then `exec`s the rest.

    A `preexec_fn` did this in the forked child, but `Popen` with a `preexec_fn` must `fork()` this whole
    process (its page tables copied: 1.8 ms of CPU per spawn at 50 MB of RSS, 30 ms at 1 GB, which a
    trainer running the env in-process has) where it otherwise uses `vfork()` (0.2 ms at any size);
    one `sh` costs about 0.7 ms. The limits are whole numbers in the units `ulimit` takes (POSIX `-f`:
    512-byte blocks; `-v`: KiB); soft and hard are both set, as `setrlimit(value, value)` did."""
    lines = [f"echo 0 > {shlex.quote(str(path))} || exit 126" for path in cgroup_procs]
    for flag, value in (
        ("-t", limits.cpu_seconds),
        ("-f", None if limits.file_size_mb is None else limits.file_size_mb * 2048),
        ("-n", limits.open_files),
        ("-c", None if limits.core_dumps else 0),
        ("-v", None if limits.address_space_mb is None else limits.address_space_mb * 1024),
    ):
        if value is not None:
            lines.append(f"ulimit {flag} {int(value)} || exit 126")
    return ["/bin/sh", "-c", "\n".join([*lines, 'exec "$@"']), "openenv-sandbox"]


def owner_prefix(pid: int | None = None) -> str:
    """How the id of every sandbox made by process `pid` (default: this one) starts: `<pid>-`."""
    return f"{os.getpid() if pid is None else pid}-"


def sandboxed_processes(owner_pid: int | None = None) -> list[psutil.Process]:
    """Live processes started by any `LocalSandbox` of process `owner_pid` (default: this one).

    Found by their marker, so daemons that left the process group count too, and sandboxes of other
    processes on the same machine (other test runs) never do.
    """
    prefix = owner_prefix(owner_pid)
    found = {p.pid: p for p in marked_processes(lambda value: value.startswith(prefix))}
    for pid in member_pids(
        os.getpid() if owner_pid is None else owner_pid
    ):  # daemons that dropped the marker
        if pid not in found and alive(pid):
            with contextlib.suppress(psutil.NoSuchProcess):
                found[pid] = psutil.Process(pid)
    return list(found.values())


def marked_processes(match: Callable[[str], bool]) -> list[psutil.Process]:
    """Live (not zombie) processes whose marker value `match` accepts (a process without the marker is
    never offered to `match`).

    Every process's environment on the host is read: as raw bytes, searched for the marker alone (this
    runs where dozens of episodes keep hundreds of processes alive; `psutil`'s `environ()` parsed every
    variable of each into a dict, 2-5x the CPU)."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/environ", "rb") as fh:
                value = _marker_value(fh.read())
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if value is None or not match(value):
            continue
        try:
            proc = psutil.Process(int(entry.name))
            if proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


_MARKER_ENTRY = MARKER.encode() + b"="


def _marker_value(environ: bytes) -> str | None:
    """The marker's value in a NUL-separated environment block (its first occurrence), or None."""
    if environ.startswith(_MARKER_ENTRY):
        start = len(_MARKER_ENTRY)
    elif (at := environ.find(b"\0" + _MARKER_ENTRY)) >= 0:
        start = at + 1 + len(_MARKER_ENTRY)
    else:
        return None
    end = environ.find(b"\0", start)
    return environ[start : end if end >= 0 else len(environ)].decode("utf-8", "replace")


def kill_tree(root: int | None, sandbox_id: str | None, grace_s: float = 1.0) -> None:
    """Kill `root` (a child not yet reaped: a reaped pid may name another process by now), its
    descendants and, unless `sandbox_id` is None, every process carrying the sandbox's marker; return
    when they are gone (or after about `grace_s` + 10 seconds). The marker search reads every process's
    environment on the host, so callers that end many processes search once (`LocalSandbox.end_agent`)."""
    procs: dict[int, psutil.Process] = {}
    if sandbox_id is not None:
        procs = {p.pid: p for p in marked_processes(lambda value: value == sandbox_id)}
    if root is not None:
        try:
            parent = psutil.Process(root)
            procs[root] = parent
            procs.update({c.pid: c for c in parent.children(recursive=True)})
            os.killpg(root, signal.SIGTERM)
        except (psutil.NoSuchProcess, ProcessLookupError, PermissionError):
            pass
    if not procs:
        return
    for proc in procs.values():
        try:
            proc.terminate()
        except psutil.NoSuchProcess:
            pass
    alive = _wait_gone(list(procs.values()), grace_s)
    for proc in alive:
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass
    _wait_gone(alive, max(grace_s, 10.0))


def _wait_gone(procs: list[psutil.Process], timeout: float) -> list[psutil.Process]:
    """Wait until each of `procs` has exited; return those still running after `timeout`.

    A zombie counts as gone: it runs nothing, and the first process of a PID namespace becomes one only
    once every other member is dead. Orphaned (its bwrap parent died first), it waits for this host's
    init to reap it, which can take seconds (`psutil.wait_procs` waited for that: a second and a half
    per running harness ended)."""
    deadline = time.monotonic() + timeout
    while True:
        alive = [p for p in procs if _running(p)]
        if not alive or time.monotonic() >= deadline:
            return alive
        procs = alive
        time.sleep(0.01)


def _running(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


class LocalProcess:
    """A harness process with a deadline; its stdout and stderr go to one log file."""

    def __init__(
        self,
        popen: subprocess.Popen[bytes],
        log: Path,
        sandbox_id: str,
        timeout_s: float,
        *,
        wrapped: bool = False,
    ) -> None:
        self._popen = popen
        # bwrap exits 128+N when its command dies of signal N; reported as -N, as Popen does.
        self._wrapped = wrapped
        self._log = log
        self._sandbox_id = sandbox_id
        self._ended_by: ProcessStatus | None = None
        self._lock = threading.Lock()
        self._watchdog = threading.Timer(timeout_s, self._end, args=("timeout",))
        self._watchdog.daemon = True
        self._watchdog.start()

    @property
    def pid(self) -> int:
        return self._popen.pid

    def exit_code(self) -> int | None:
        code = self._popen.poll()
        if self._wrapped and code is not None and 128 < code <= 128 + 64:
            return 128 - code
        return code

    def status(self) -> ProcessStatus:
        code = self.exit_code()
        if code is None:
            return "running"
        if self._ended_by is not None:
            return self._ended_by
        if code < 0:
            return "crashed"
        return "exited" if code == 0 else "failed"

    def wait(self, timeout: float | None = None) -> ProcessStatus:
        deadline = None if timeout is None else time.monotonic() + timeout
        if timeout is not None:
            _exit_or_timeout(self._popen, timeout)
        try:
            # What is left of the timeout: the watchdog's kill may be reaping it right now, and Popen
            # only sees the exit once that thread lets go.
            self._popen.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
        return self.status()

    def output_tail(self, chars: int = 2000) -> str:
        try:
            with self._log.open("rb") as fh:
                fh.seek(max(0, self._log.stat().st_size - chars))
                return fh.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    def _end(self, reason: ProcessStatus, *, sweep: bool = True) -> None:
        with self._lock:
            running = self._popen.poll() is None
            if running and self._ended_by is None:
                self._ended_by = reason
            # A bwrap-wrapped process's descendants all live in its PID namespace, which the kernel
            # empties when the namespace's first process dies: its own tree is all there is to kill, and
            # once it has exited there is nothing left. Unwrapped, a daemon may have left the tree (setsid,
            # double fork): found by the marker, unless the caller sweeps for every process at once.
            marker = None if self._wrapped or not sweep else self._sandbox_id
            if running or marker is not None:
                kill_tree(self._popen.pid if running else None, marker)
            self._popen.wait(5)

    def kill(self, *, sweep: bool = True) -> None:
        """End the process and its descendants. `sweep=False` leaves the search for daemons that left
        the tree of an unwrapped process to the caller (`LocalSandbox.end_agent` searches once for all)."""
        self._watchdog.cancel()
        self._end("killed", sweep=sweep)


def _exit_or_timeout(popen: subprocess.Popen[bytes], timeout: float) -> None:
    """Block until `popen` exits or `timeout` passes, woken by the exit itself (a pidfd): `Popen.wait`
    with a timeout polls, sleeping up to 50 ms between looks, which every command run paid as latency."""
    if popen.poll() is not None or not hasattr(os, "pidfd_open"):
        return
    try:
        fd = os.pidfd_open(popen.pid)
    except OSError:
        return
    try:
        if popen.poll() is None:  # not reaped before the pidfd was opened: it is our child's
            select.select([fd], [], [], timeout)
    finally:
        os.close(fd)


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
