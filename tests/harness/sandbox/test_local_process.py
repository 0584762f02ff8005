"""Ending a local sandbox's processes (`LocalProcess.kill`, `kill_tree`, `LocalSandbox.end_agent`): every
process the agent left is gone before grading, and the host's process table is searched by marker once
per `end_agent` that has something new to end, not once per process ever started, and never for a
bubblewrap sandbox, whose PID namespaces end every process (issue 48: each search reads the environment
of every process on the host, and an episode ran nine of them)."""

from __future__ import annotations

import os
import subprocess
import time

import psutil
import pytest

from openenv.harness.sandbox import Limits, LocalSandbox, local_process
from openenv.harness.tasks.model import Task
from openenv.harness.verifier import verify

# The tests pass when no process of the agent's is alive while they run: its daemon rewrites the
# heartbeat every 20 ms, so two reads 0.3 s apart differ while it lives.
_TEST_SH = (
    "a=$(cat /app/heartbeat 2>/dev/null); sleep 0.3; b=$(cat /app/heartbeat 2>/dev/null); "
    'if [ "$a" = "$b" ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt'
)
_TASK = Task(
    id="quiet-grading", instruction="-", tests={"test.sh": _TEST_SH}, test_command="sh /tests/test.sh"
)


@pytest.fixture
def searches(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the searches of the host's process table by marker."""
    calls: list[int] = []
    search = local_process.marked_processes

    def counted(match):  # type: ignore[no-untyped-def]
        calls.append(1)
        return search(match)

    monkeypatch.setattr(local_process, "marked_processes", counted)
    return calls


def _alive_with(needle: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter():
        try:
            if needle in " ".join(proc.cmdline()) and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


@pytest.mark.parametrize("isolation", ["bwrap", "none"])
def test_an_episode_searches_by_marker_once_per_end_agent_and_no_daemon_reaches_grading(
    isolation: str, searches: list[int]
) -> None:
    tag = f"{time.time_ns() % 10**6}.{os.getpid()}"  # a sleep length no other process uses
    network = "loopback" if isolation == "bwrap" else "host"
    box = LocalSandbox(isolation=isolation, network=network)  # type: ignore[arg-type]
    try:
        workdir = box.workdir if isolation == "bwrap" else str(box.workspace)
        box.run(["true"])  # a harness's setup command
        # The agent: a daemon that left its session and dropped the marker, double-forked, writing on.
        daemon = f"while :; do date +%s%N > {workdir}/heartbeat; sleep 0.02; done"
        box.start(
            [
                "sh",
                "-c",
                f"(env -u OPENENV_SANDBOX setsid sh -c '{daemon}' &) ; sleep {tag}",
            ],
            env={},
            timeout_s=120,
        )
        deadline = time.monotonic() + 10
        while not (box.workspace / "heartbeat").exists() or not _alive_with(f"sleep {tag}"):
            assert time.monotonic() < deadline, "the agent and its daemon never started"
            time.sleep(0.05)
        searches.clear()  # unwrapped, the setup command's run searched for daemons it left
        verdict = verify(box, _TASK)
        if isolation == "bwrap":  # the tests saw the heartbeat stand still: the daemon was gone
            assert (verdict.status, verdict.reward) == ("scored", 1.0), verdict
        assert not _alive_with(f"sleep {tag}")
        # Wrapped: no search at all, the daemon lived in the agent's PID namespace and ended with it.
        # Unwrapped: one as the agent ends and one after the tests (no PID namespace ends what they
        # left), besides the setup run's; close: none, nothing new was started.
        expected = 0 if isolation == "bwrap" else 3
        assert len(searches) == expected, searches
        box.close()
        assert len(searches) == expected, searches
    finally:
        box.close()
    assert not _alive_with(f"sleep {tag}")


def test_a_second_end_agent_of_an_unwrapped_sandbox_searches_nothing(
    searches: list[int],
) -> None:
    with LocalSandbox(isolation="none", network="host") as box:
        box.start(["sleep", "60"], env={}, timeout_s=60)
        box.end_agent()
        box.end_agent()
        assert len(searches) == 1


def test_a_wrapped_sandbox_never_searches_the_hosts_process_table(searches: list[int]) -> None:
    with LocalSandbox() as box:
        for _ in range(3):
            assert box.run(["true"]).exit_code == 0  # each run ends its process: exited, wrapped, gone
        box.start(["sleep", "60"], env={}, timeout_s=60)
        box.end_agent()
        box.end_agent()
    assert searches == []


def test_a_zombie_another_process_has_not_reaped_counts_as_gone() -> None:
    """The first process of a bwrap PID namespace, orphaned when its bwrap parent dies first, waits as a
    zombie for this host's init to reap it (seconds, where init is slow): dead already, never waited for."""
    parent = subprocess.Popen(["sh", "-c", "true & exec sleep 60"])  # `sleep` never reaps the `true`
    try:
        deadline = time.monotonic() + 10
        while not (children := psutil.Process(parent.pid).children()):
            assert time.monotonic() < deadline, "the child never started"
            time.sleep(0.01)
        zombie = children[0]
        while zombie.status() != psutil.STATUS_ZOMBIE:
            assert time.monotonic() < deadline, "the child never exited"
            time.sleep(0.01)
        assert local_process._wait_gone([zombie], timeout=60) == []
        assert zombie.status() == psutil.STATUS_ZOMBIE  # still unreaped: it was not waited out
    finally:
        parent.kill()
        parent.wait(10)


@pytest.mark.parametrize(
    ("environ", "value"),
    [
        (b"OPENENV_SANDBOX=12-ab\0PATH=/bin\0", "12-ab"),  # first
        (b"PATH=/bin\0OPENENV_SANDBOX=12-ab\0", "12-ab"),  # last
        (b"PATH=/bin\0OPENENV_SANDBOX=12-ab", "12-ab"),  # no trailing NUL
        (b"PATH=/bin\0NOT_OPENENV_SANDBOX=12-ab\0", None),  # another variable ending in the name
        (b"PATH=/bin\0OPENENV_SANDBOX_X=12-ab\0", None),
        (b"", None),  # a zombie's or a kernel thread's
    ],
)
def test_the_marker_is_read_from_raw_environment_blocks(environ: bytes, value: str | None) -> None:
    assert local_process._marker_value(environ) == value


def test_every_rlimit_reaches_the_command_exactly_and_it_runs_in_the_sandboxs_cgroups() -> None:
    """Set by `confine`'s `sh` (in ulimit's units), not by a preexec_fn: the same limits, to the byte."""
    limits = Limits(cpu_seconds=77, file_size_mb=3, open_files=99, address_space_mb=8192, core_dumps=False)
    with LocalSandbox(limits=limits) as box:
        process = box.start(["sh", "-c", "cat /proc/self/limits; sleep 30"], env={}, timeout_s=60)
        deadline = time.monotonic() + 10
        while "Max address space" not in process.output_tail():
            assert time.monotonic() < deadline, process.output_tail()
            time.sleep(0.02)
        members = set(box._cgroup.pids()) if box._cgroup is not None else set()
        assert process.pid in members  # the outermost process joined before it exec'd anything
        rows = {line[:26].strip(): line[26:].split()[:2] for line in process.output_tail().splitlines()}
        process.kill()
    assert rows["Max cpu time"] == ["77", "77"]
    assert rows["Max file size"] == [str(3 << 20)] * 2
    assert rows["Max open files"] == ["99", "99"]
    assert rows["Max core file size"] == ["0", "0"]
    assert rows["Max address space"] == [str(8192 << 20)] * 2
