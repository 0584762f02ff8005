"""The sandbox's cgroup: members are found and killed together, limits are set, and groups left by a
process that died without closing its sandboxes are swept (their members killed) by a later sweep (every
sandbox asks for one; a process sweeps at most once a minute)."""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from openenv.harness.sandbox.cgroup import SandboxCgroup, member_pids, sweep_stale


def _join(group: SandboxCgroup) -> subprocess.Popen[bytes]:
    fds = group.join_fds()

    def enter() -> None:
        for fd in fds:
            os.write(fd, b"0")

    # setsid + a double fork: nothing of this tree is a child we could wait for
    return subprocess.Popen(
        ["sh", "-c", "setsid sh -c 'sleep 300 & sleep 300' & sleep 300"], preexec_fn=enter
    )


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


def test_a_sweep_asked_for_again_within_its_interval_does_nothing_until_the_interval_passes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every sandbox asks for a sweep (~0.35 ms of reading every hierarchy); one a minute finds the
    groups of processes that died as well."""
    from openenv.harness.sandbox import cgroup

    now = [1000.0]
    monkeypatch.setattr(cgroup.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(cgroup, "_SWEPT_AT", [float("-inf")])
    dead = subprocess.Popen(["true"])
    dead.wait()
    sweep_stale(every_s=60)  # the first one sweeps
    group = SandboxCgroup.create(f"{dead.pid}-later{time.time_ns() % 10**6}", pids=16, memory_mb=None)
    try:
        now[0] += 30
        assert sweep_stale(every_s=60) == []  # within the interval: not read
        assert all(d.exists() for d in group.dirs)
        now[0] += 31
        assert {str(d) for d in group.dirs} <= set(sweep_stale(every_s=60))
    finally:
        group.remove()


def test_a_group_is_found_under_a_mount_of_its_own_subtree_as_in_a_container() -> None:
    """In a container without a cgroup namespace, /proc/self/cgroup names `/docker/<id>` and the mount at
    /sys/fs/cgroup/pids is that subtree: the group is the mount's root, not `<mount>/docker/<id>`."""
    from openenv.harness.sandbox.cgroup import _under_mount_root

    assert _under_mount_root("/docker/abc", "/docker/abc") == "/"
    assert _under_mount_root("/docker/abc/inner", "/docker/abc") == "/inner"
    assert _under_mount_root("/user.slice/x", "/") == "/user.slice/x"
    assert _under_mount_root("/docker/abcdef", "/docker/abc") == "/docker/abcdef"


def test_inside_a_container_the_cgroup_can_be_left_out_explicitly_and_is_warned(monkeypatch, caplog) -> None:
    """Docker mounts /sys/fs/cgroup read-only, so an env image sets OPENENV_SANDBOX_CGROUP=none: the sandbox
    runs with no cgroup of its own (the container bounds it), says so on every sandbox, and still ends
    a daemon the agent left through its PID namespace."""
    import psutil

    from openenv.harness.sandbox.local import NO_CGROUP_ENV, LocalSandbox

    monkeypatch.setenv(NO_CGROUP_ENV, "none")
    with LocalSandbox(network="host") as box:
        assert box.cgroup == "none"
        result = box.run(["sh", "-c", "setsid sleep 7654321 >/dev/null 2>&1 & echo inside"], timeout_s=30)
        assert result.exit_code == 0 and result.output.split()[0] == "inside"
        box.end_agent()
        time.sleep(0.5)
        left = [p for p in psutil.process_iter(["cmdline"]) if "7654321" in " ".join(p.info["cmdline"] or [])]
        assert not left, "the daemon outlived its PID namespace"
    assert any(NO_CGROUP_ENV in r.getMessage() for r in caplog.records)
