"""Run a command that cannot outlive the process that started it, even if that process is SIGKILLed.

A test session starts a vLLM server (1.8 GB) for its tests. If the session dies without its teardown
(pytest-timeout's `os._exit`, SIGKILL, an OOM kill), nothing stops the server: an orphan was found
still running 20 minutes after a failed session. `guarded(argv)` prefixes a command with this module:

    python -m openenv.core.guard <parent pid> -- <argv...>

The guard leads its own process group (start it with `start_new_session=True`), asks the kernel for a
signal when its parent dies (`prctl(PR_SET_PDEATHSIG)`, Linux; it also polls its parent id), and
runs `argv` as its child in that group. When the parent dies, or the guard is told to stop, it stops the
whole group: SIGTERM, then SIGKILL after a grace period, so the command's own children (vLLM's engine
process) go too. Stopping the group from outside (`os.killpg`) works as before.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import threading
import time

__all__ = ["die_with_parent", "guarded", "main"]

PR_SET_PDEATHSIG = 1
GRACE_S = 10.0


def guarded(argv: list[str], *, python: str | None = None) -> list[str]:
    """`argv` run under the guard, tied to this process (start the result with `start_new_session=True`)."""
    return [python or sys.executable, "-m", "openenv.core.guard", str(os.getpid()), "--", *argv]


def die_with_parent(sig: int = signal.SIGTERM) -> bool:
    """Ask the kernel to send `sig` to this process when its parent thread exits; False where unsupported."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def _stop_group(child: subprocess.Popen[bytes]) -> None:
    """SIGTERM the group (the command and everything it started), SIGKILL it after the grace period."""
    group = os.getpgrp()
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the group signal below reaches the guard too
    try:
        os.killpg(group, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + GRACE_S
    while child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    os.killpg(group, signal.SIGKILL)  # ends the guard as well


def main(args: list[str]) -> int:
    if len(args) < 3 or args[1] != "--":
        print("usage: python -m openenv.core.guard PARENT_PID -- COMMAND...", file=sys.stderr)
        return 2
    parent = int(args[0])
    wake = threading.Event()
    stopping = threading.Event()

    def on_stop(signum: int, frame: object) -> None:
        stopping.set()
        wake.set()

    # The kernel signals when the parent *thread* exits; only a changed parent id means the process
    # itself is gone (a server started from a worker thread must not stop with that thread).
    signal.signal(signal.SIGUSR2, lambda signum, frame: wake.set())
    die_with_parent(signal.SIGUSR2)
    if os.getppid() != parent:  # the parent died before the request above took effect
        return 1
    child = subprocess.Popen(args[2:])  # same process group as the guard
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_stop)
    while child.poll() is None:
        if stopping.is_set() or os.getppid() != parent:  # told to stop, or orphaned
            _stop_group(child)
            break
        wake.wait(0.5)
        wake.clear()
    return child.wait()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
