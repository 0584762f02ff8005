"""The sandbox's cgroup: members are found and killed together, limits are set, and groups left by a
process that died without closing its sandboxes are swept (their members killed) by the next one."""

from __future__ import annotations

import os
import subprocess
import time

from openenv.harness.sandbox.cgroup import SandboxCgroup, member_pids, sweep_stale


def _join(group: SandboxCgroup) -> subprocess.Popen[bytes]:
    fds = group.join_fds()

    def enter() -> None:
        for fd in fds:
            os.write(fd, b"0")

    # setsid + a double fork: nothing of this tree is a child we could wait for
    return subprocess.Popen(["sh", "-c", "setsid sh -c 'sleep 300 & sleep 300' & sleep 300"],
                            preexec_fn=enter)  # noqa: PLW1509


def test_kill_ends_every_member_and_remove_deletes_the_groups():
    group = SandboxCgroup.create(f"{os.getpid()}-unit{time.time_ns() % 10**6}", pids=32, memory_mb=64)
    try:
        assert group.dirs and group.described
        proc = _join(group)
        deadline = time.monotonic() + 10
        while len(group.pids()) < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(group.pids()) >= 4 and set(group.pids()) <= set(member_pids(os.getpid()))
        assert group.kill(timeout_s=10)
        assert proc.wait(10) == -9 and group.pids() == []
    finally:
        group.remove()
    assert not any(d.exists() for d in group.dirs)


def test_groups_of_a_dead_owner_are_swept_with_their_members():
    dead = subprocess.Popen(["true"])
    dead.wait()  # a pid that no longer runs, as a crashed owner's
    group = SandboxCgroup.create(f"{dead.pid}-stale{time.time_ns() % 10**6}", pids=16, memory_mb=None)
    dirs = list(group.dirs)
    proc = _join(group)
    deadline = time.monotonic() + 10
    while len(group.pids()) < 4 and time.monotonic() < deadline:
        time.sleep(0.05)
    swept = sweep_stale()
    assert {str(d) for d in dirs} <= set(swept)
    assert proc.wait(10) == -9
    assert not any(d.exists() for d in dirs)
