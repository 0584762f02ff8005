"""`once`: concurrent callers of one key, threads or processes, share one run of the work and its outcome;
a failure reaches each waiter once and the next request tries again."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from openenv.errors import EnvError
from openenv.harness.sandbox.once import OnceFailed, once

REPO = Path(__file__).resolve().parents[3]


def _slow(counter: list[int], result: str = "made", *, fail: bool = False, delay_s: float = 0.5):
    def work() -> str:
        counter.append(1)
        time.sleep(delay_s)
        if fail:
            raise EnvError(f"build {len(counter)} failed: disk full")
        return result

    return work


def _together(n: int, call) -> list[object]:
    """Run `call()` on n threads released at once; each result or raised exception, in order."""
    gate = threading.Barrier(n)

    def one(_: int) -> object:
        gate.wait()
        try:
            return call()
        except Exception as exc:
            return exc

    with ThreadPoolExecutor(n) as pool:
        return list(pool.map(one, range(n)))


def test_eight_threads_share_one_run_and_its_result(tmp_path: Path) -> None:
    runs: list[int] = []
    waits: list[str] = []
    outcomes = _together(8, lambda: once("k-ok", _slow(runs), on_wait=waits.append, folder=tmp_path))
    assert runs == [1]
    assert outcomes == ["made"] * 8
    assert len(waits) == 7 and all("k-ok" in line for line in waits)


def test_a_failure_fails_each_waiting_thread_once_with_the_same_reason_and_the_next_request_retries(
    tmp_path: Path,
) -> None:
    runs: list[int] = []
    outcomes = _together(8, lambda: once("k-bad", _slow(runs, fail=True), folder=tmp_path))
    assert runs == [1]
    assert all(isinstance(o, EnvError) for o in outcomes)
    assert {str(o) for o in outcomes} == {"build 1 failed: disk full"}
    with pytest.raises(EnvError, match="build 2 failed"):  # a later request runs the work again
        once("k-bad", _slow(runs, fail=True, delay_s=0), folder=tmp_path)
    assert once("k-bad", _slow(runs, delay_s=0), folder=tmp_path) == "made"
    assert runs == [1, 1, 1]


def test_different_keys_do_not_wait_for_each_other(tmp_path: Path) -> None:
    runs: list[int] = []
    keys = iter(range(100))
    lock = threading.Lock()

    def call() -> object:
        with lock:
            key = f"k-{next(keys)}"
        return once(key, _slow(runs, delay_s=0.2), folder=tmp_path)

    assert _together(4, call) == ["made"] * 4
    assert len(runs) == 4


_WORKER = """
import sys, time
from pathlib import Path
from openenv.harness.sandbox.once import once, OnceFailed
folder, me = Path(sys.argv[1]), sys.argv[2]
(folder / f"ready-{me}").touch()
while not (folder / "go").exists():
    time.sleep(0.01)
def work():
    made = folder / "made"
    if made.exists():  # the result exists: what a later caller finds after a success
        return "found"
    with open(folder / "attempts", "a") as f:
        f.write(me + "\\n")
    time.sleep(1.5)
    if (folder / "fail").exists():
        raise RuntimeError(f"pull by {me} failed: registry said 503")
    made.touch()
    return "made"
try:
    print(once("image-x", work, folder=folder / "locks"))
except OnceFailed as exc:
    print("waited-failed:" + str(exc))
except RuntimeError as exc:
    print("failed:" + str(exc))
"""


def _processes(folder: Path, n: int) -> list[str]:
    (folder / "locks").mkdir(parents=True)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WORKER, str(folder), str(i)], stdout=subprocess.PIPE, text=True, env=env
        )
        for i in range(n)
    ]
    deadline = time.monotonic() + 60
    while len(list(folder.glob("ready-*"))) < n and time.monotonic() < deadline:
        time.sleep(0.05)
    (folder / "go").touch()
    return sorted(p.communicate(timeout=60)[0].strip() for p in procs)


def test_processes_share_one_run_through_the_file_lock(tmp_path: Path) -> None:
    outcomes = _processes(tmp_path, 4)
    assert len((tmp_path / "attempts").read_text().split()) == 1
    assert sorted(outcomes) == ["found", "found", "found", "made"]


def test_a_failure_in_one_process_fails_the_waiting_processes_with_its_reason(tmp_path: Path) -> None:
    (tmp_path / "fail").touch()
    outcomes = _processes(tmp_path, 4)
    attempts = (tmp_path / "attempts").read_text().split()
    assert len(attempts) == 1, "a waiting process retried instead of taking the failure"
    leader = attempts[0]
    assert outcomes.count(f"failed:pull by {leader} failed: registry said 503") == 1
    assert outcomes.count(f"waited-failed:pull by {leader} failed: registry said 503") == 3
    assert OnceFailed.__mro__[1] is EnvError
