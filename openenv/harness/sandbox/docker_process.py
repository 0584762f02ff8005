"""DockerProcess: a process started with `docker exec` in an episode container, with a deadline.

Its output goes to a log on a bind mount that the host tails. Every process carries a marker variable
(`OPENENV_PROC=<sandbox>:<n>`) that its descendants inherit, `setsid` daemons included, so a kill inside
the container finds the whole tree; the snippets below do that with the image's own python3.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any, Protocol

import docker
import docker.errors

from openenv.harness.sandbox.base import ProcessStatus

__all__ = [
    "END_AGENT_SNIPPET",
    "KILL_SNIPPET",
    "LIST_SNIPPET",
    "MAIN_PID_SNIPPET",
    "MARKER",
    "POLL_S",
    "DockerProcess",
    "ExecHost",
]

MARKER = "OPENENV_PROC"
POLL_S = 0.05

# Kills every process in the container but PID 1 (docker-init), the main process and itself, until none
# is left: forks racing the kill are caught by the next round. Used in the grading container only (the
# agent's own container is removed whole by `end_agent`), for the tests' leftovers. Run as the tests' user,
# and always as `python3 -I -S`: the agent shares HOME with us, and a usercustomize.py or .pth file it
# planted in ~/.local would otherwise run first (the red-team suite found that one).
END_AGENT_SNIPPET = """
import os, signal, sys, time
keep = {1, os.getpid(), int(sys.argv[1])}
def alive():
    for p in os.listdir('/proc'):
        if p.isdigit() and int(p) not in keep:
            try:
                if open('/proc/%s/stat' % p).read().rsplit(')', 1)[1].split()[0] != 'Z':
                    yield int(p)
            except OSError:
                pass
for _ in range(200):
    pids = list(alive())
    if not pids:
        break
    for pid in pids:
        try: os.kill(pid, signal.SIGKILL)
        except PermissionError: keep.add(pid)  # init, main and forwarders run as root: never ours to end
        except OSError: pass
    time.sleep(0.01)
else:
    sys.exit('processes survived: %s' % pids)
"""
MAIN_PID_SNIPPET = """
import os
for p in os.listdir('/proc'):
    if p.isdigit() and p != '1' and int(p) != os.getpid():
        try:
            if open('/proc/%s/stat' % p).read().rsplit(')', 1)[1].split()[1] == '1': print(p)
        except OSError: pass
"""

# Signals every process carrying MARKER=<tag> (descendants inherit it, `setsid` daemons too), then kills.
KILL_SNIPPET = """
import os, signal, sys, time
tag = sys.argv[1].encode()
def marked():
    for p in os.listdir('/proc'):
        if p.isdigit() and int(p) != os.getpid():
            try:
                if tag in open('/proc/%s/environ' % p, 'rb').read().split(b'\\0'):
                    yield int(p)
            except OSError:
                pass
for sig in (signal.SIGTERM, signal.SIGKILL):
    pids = list(marked())
    for pid in pids:
        try: os.kill(pid, sig)
        except OSError: pass
    if pids and sig == signal.SIGTERM: time.sleep(0.5)
"""
LIST_SNIPPET = """
import os, sys
tag = sys.argv[1].encode()
for p in os.listdir('/proc'):
    if p.isdigit() and int(p) != os.getpid():
        try:
            env = open('/proc/%s/environ' % p, 'rb').read().split(b'\\0')
            if any(e.startswith(tag) for e in env): print(p)
        except OSError: pass
"""


class ExecHost(Protocol):
    """What a DockerProcess needs from its sandbox."""

    api: docker.APIClient

    def lost_reason(self) -> str | None: ...

    def runs_commands(self) -> bool: ...

    def signal_marked(self, tag: str) -> None: ...


class DockerProcess:
    """A process started with `docker exec` in the episode container; output goes to a bind-mounted log."""

    def __init__(self, sandbox: ExecHost, exec_id: str, tag: str, log: Path, timeout_s: float) -> None:
        self._sandbox = sandbox
        self._exec_id = exec_id
        self._tag = tag
        self._log = log
        self._ended_by: ProcessStatus | None = None
        self._final: tuple[ProcessStatus, int | None] | None = None
        self.lost = False
        self._lock = threading.Lock()
        self._pid = int(self._inspect().get("Pid") or 0)
        self._watchdog = threading.Timer(timeout_s, self._end, args=("timeout",))
        self._watchdog.daemon = True
        self._watchdog.start()

    @property
    def pid(self) -> int:
        """The process's pid as this host sees it (0 if the engine did not say)."""
        return self._pid

    def _inspect(self) -> dict[str, Any]:
        try:
            return self._sandbox.api.exec_inspect(self._exec_id)
        except docker.errors.NotFound:
            return {"Running": False, "ExitCode": None, "Pid": 0, "Gone": True}

    def _settle(self) -> tuple[ProcessStatus, int | None]:
        if self._final is not None:
            return self._final
        info = self._inspect()
        if info.get("Running"):
            return "running", None
        code = info.get("ExitCode")
        if self._ended_by is not None:
            status: ProcessStatus = self._ended_by
        elif code == 0:
            status = "exited"
        elif info.get("Gone") or code is None or self._sandbox.lost_reason() is not None:
            status, self.lost = "crashed", True
        elif not 128 < code < 160:
            status = "failed"
        else:  # killed by a signal: lost if with its container, which may still read "running" here
            status, self.lost = "crashed", not self._sandbox.runs_commands()
        self._final = (status, code)
        self._watchdog.cancel()
        return self._final

    def status(self) -> ProcessStatus:
        return self._settle()[0]

    def exit_code(self) -> int | None:
        return self._settle()[1]

    def wait(self, timeout: float | None = None) -> ProcessStatus:
        deadline = None if timeout is None else time.monotonic() + timeout
        while (status := self.status()) == "running":
            if deadline is not None and time.monotonic() >= deadline:
                break
            time.sleep(POLL_S)
        return status

    def output_tail(self, chars: int = 2000) -> str:
        try:  # O_NOFOLLOW: the container can swap its log for a link to a host file
            with os.fdopen(os.open(self._log, os.O_RDONLY | os.O_NOFOLLOW), "rb") as fh:
                size = os.fstat(fh.fileno()).st_size
                fh.seek(max(0, size - chars))
                text = fh.read(chars).decode("utf-8", "replace")
        except OSError:
            text = ""
        if self.lost:
            text += f"\n[openenv] {self._sandbox.lost_reason() or 'sandbox lost'}\n"
        return text[-chars:]

    def _end(self, reason: ProcessStatus) -> None:
        with self._lock:
            if self._final is None and self._ended_by is None and self._inspect().get("Running"):
                self._ended_by = reason
            self._sandbox.signal_marked(self._tag)

    def kill(self) -> None:
        self._watchdog.cancel()
        if self._final is None:
            self._end("killed")

    def mark_killed(self) -> None:
        """Record that we are about to remove the container under this process (so it is not `lost`)."""
        self._watchdog.cancel()
        if self._final is None and self._ended_by is None:
            self._ended_by = "killed"
