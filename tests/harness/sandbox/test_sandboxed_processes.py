"""`sandboxed_processes()`: the leak check every harness and reliability test runs. It must find what this
process's sandboxes started, escaped daemons included, and nothing another run on the machine started."""

from __future__ import annotations

import os
import subprocess
import time

import psutil

from openenv.harness.sandbox.local import MARKER, LocalSandbox, sandboxed_processes


def _sleeps(pids: set[int]) -> list[int]:
    names = {}
    for pid in pids:
        try:
            names[pid] = psutil.Process(pid).name()
        except psutil.NoSuchProcess:
            pass
    return [pid for pid, name in names.items() if name == "sleep"]


def _pids_within(seconds: float, want_sleeps: int) -> set[int]:
    """Our sandboxed pids, polled until `want_sleeps` sleeps run (a loaded machine forks slowly)."""
    deadline = time.monotonic() + seconds
    while (
        len(_sleeps(pids := {p.pid for p in sandboxed_processes()})) < want_sleeps
        and time.monotonic() < deadline
    ):
        time.sleep(0.05)
    return pids


def test_finds_every_process_of_every_sandbox_of_this_process_until_closed() -> None:
    with LocalSandbox() as one, LocalSandbox() as two:
        a = one.start(["sleep", "60"], env={}, timeout_s=60)
        b = two.start(["sh", "-c", "setsid sleep 60 & wait"], env={}, timeout_s=60)
        found = _pids_within(10, want_sleeps=2)  # each command runs under bwrap processes of its own
        assert {a.pid, b.pid} <= found and len(_sleeps(found)) == 2, (
            "the setsid daemon is found by its marker"
        )
    assert sandboxed_processes() == []


def test_a_sandbox_of_another_process_is_not_ours() -> None:
    other_owner = os.getppid()  # any pid but ours: the marker is all that is read
    foreign = subprocess.Popen(["sleep", "60"], env={**os.environ, MARKER: f"{other_owner}-0123456789ab"})
    try:
        deadline = time.monotonic() + 10
        while foreign.pid not in {p.pid for p in sandboxed_processes(owner_pid=other_owner)}:
            assert time.monotonic() < deadline, "the foreign marker was never seen"
            time.sleep(0.05)
        assert foreign.pid not in {p.pid for p in sandboxed_processes()}
    finally:
        foreign.kill()
        foreign.wait(10)


def test_zombies_are_not_counted() -> None:
    with LocalSandbox() as box:
        process = box.start(["true"], env={}, timeout_s=10)
        deadline = time.monotonic() + 10
        while psutil.Process(process.pid).status() != psutil.STATUS_ZOMBIE:  # exited, not yet reaped
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert process.pid not in {p.pid for p in sandboxed_processes()}
        process.wait(10)
