"""A pytest plugin: no child process outlives the session. At the session's end, after every fixture's
teardown, whatever this process still has below it (a server a test started and never stopped, a
harness a failed test left running) is stopped and named on stderr.

Teardown does not run when the session itself dies (pytest-timeout's `os._exit`, SIGKILL); the session's
vLLM is covered for that by `openenv.core.guard`. The suite's conftest imports the hook; any other
suite can use it with `-p openenv.testing.leftovers`.
"""

from __future__ import annotations

import sys

import psutil
import pytest

__all__ = ["pytest_sessionfinish", "stop_descendants"]


def stop_descendants(grace_s: float = 5.0) -> list[str]:
    """SIGTERM every process below this one, SIGKILL those still alive after `grace_s`; their
    `pid name` (zombies, already dead, are not counted)."""
    found = []
    for proc in psutil.Process().children(recursive=True):
        try:
            if proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except psutil.Error:
            continue
    named = []
    for proc in found:
        try:
            named.append(f"{proc.pid} {proc.name()}")
            proc.terminate()
        except psutil.Error:
            continue
    _, alive = psutil.wait_procs(found, timeout=grace_s)
    for proc in alive:
        try:
            proc.kill()
        except psutil.Error:
            continue
    return named


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    left = stop_descendants()
    if left:
        print(
            f"\nstopped {len(left)} process(es) the session left running: {', '.join(left[:10])}",
            file=sys.stderr,
            flush=True,
        )
