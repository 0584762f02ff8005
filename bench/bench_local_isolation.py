"""What the local sandbox's boundary costs: bubblewrap + cgroup against the same sandbox without them.

    .venv/bin/python bench/bench_local_isolation.py [--reps 10] [--episode-reps 3] [--harness pi]

Measured side by side in one run, median and p90, with the ratio to the unisolated baseline
(`isolation="none"`, host network, no cgroup limits):

1. **sandbox + first command**: constructing a LocalSandbox (one forwarded proxy port) until a started
   command is running (it touches a file the host polls for).
2. **one short command**: `run(["true"])` in a sandbox that exists (start, exit, cleanup).
3. **first model request**: `HarnessEnvironment.reset()` until the harness's first request reaches the
   proxy (in-process tiny model), for `--harness`.

What grading costs, in CPU (issue 48: the verifier's fixed cost over the same tests run plainly):

    .venv/bin/python bench/bench_local_isolation.py --grading [--against /path/to/other/checkout]

4. **grading command**: one `run(["sh", "-c", "true"])` after `end_agent()` (as the verifier runs the
   tests: no proxy bridge), CPU seconds of this process and of the processes it started and reaped, and
   the processes the sandbox adds around a command (its cgroup's members while a `sleep` runs, minus
   the `sleep`).
5. **verify + close**: one episode's grading as the env runs it: the agent (a setup command, and a
   harness that exited leaving a `setsid` daemon) ended, the task's tests staged and run, the reward read,
   then `close()`; with the built-in task's own tests and with `true` as the test command (what the
   sandbox adds, without the tests' own cost).

`--ballast-mb N` has the measuring process hold N MB first, as an env process with a model or a
trainer in it does (a `fork()` copies its page tables). `--against DIR` runs the same grading measurements with the openenv of another checkout (a worktree of
main) in alternating subprocesses, and reports each figure as this tree / that one.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

from openenv.core.net import free_port
from openenv.harness.sandbox.base import Limits
from openenv.harness.sandbox.local import LocalSandbox

_NO_LIMITS = Limits(pids=None, memory_mb=None)


def _p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]


def _makers(port: int) -> dict[str, Callable[[], LocalSandbox]]:
    return {
        "none (baseline: host, no cgroup)": lambda: LocalSandbox(
            isolation="none", network="host", limits=_NO_LIMITS, forward_ports=(port,)
        ),
        "bwrap + cgroup, loopback netns": lambda: LocalSandbox(forward_ports=(port,)),
        "bwrap + cgroup, host network": lambda: LocalSandbox(network="host", forward_ports=(port,)),
    }


def _first_command(make: Callable[[], LocalSandbox]) -> float:
    start = time.perf_counter()
    box = make()
    try:
        marker = box.workspace / "started"
        box.start(
            ["sh", "-c", f"touch {box.workdir}/started 2>/dev/null || touch {marker}; sleep 30"],
            env={},
            timeout_s=60,
        )
        while not marker.exists():
            time.sleep(0.001)
        return time.perf_counter() - start
    finally:
        box.close()


def _short_command(make: Callable[[], LocalSandbox], reps: int) -> list[float]:
    with make() as box:
        box.run(["true"])  # warm
        times = []
        for _ in range(reps):
            start = time.perf_counter()
            box.run(["true"])
            times.append(time.perf_counter() - start)
    return times


def _first_request(harness: str, server: Any, reps: int, isolation: str) -> list[float]:
    from openenv.harness.environment import EpisodeSettings, HarnessEnvironment
    from openenv.harness.tasks import builtin_task

    times = []
    for _ in range(reps):
        env = HarnessEnvironment(
            harness,
            server=server,
            settings=EpisodeSettings.model_validate(
                {"isolation": isolation, "network": "host" if isolation == "none" else "loopback"}
            ),
        )
        start = time.perf_counter()
        try:
            obs = env.reset(task=builtin_task("fix-temperature-conversion"))
            times.append(time.perf_counter() - start)
            assert obs.pending is not None, obs.output_tail
        finally:
            env.close()
    return times


def _row(label: str, times: list[float], base: float) -> dict[str, Any]:
    median = statistics.median(times)
    return {
        "what": label,
        "median_ms": round(median * 1000, 1),
        "p90_ms": round(_p90(times) * 1000, 1),
        "ratio": round(median / base, 2) if base else None,
    }


# ---- grading (issue 48) -------------------------------------------------------------------------------


_CPU: Any = None  # bench_episode.CpuGroup: this process and every process it starts, reaped or not


def _cpu() -> tuple[float, float]:
    """CPU seconds so far: this process, and everything (this process included) in its cpuacct group.
    A sandbox's processes are not all reaped by us (bwrap's PID-namespace init is not), so
    RUSAGE_CHILDREN misses most of them."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    return own.ru_utime + own.ru_stime, _CPU.seconds()


def _cpu_of(fn: Callable[[], Any]) -> tuple[float, float]:
    """(this process, the processes it started) CPU seconds spent by `fn`."""
    own0, all0 = _cpu()
    fn()
    own1, all1 = _cpu()
    return own1 - own0, (all1 - all0) - (own1 - own0)


def _processes_around_a_command(box: LocalSandbox) -> int:
    """How many processes the sandbox runs around one command: its cgroup's members while a `sleep`
    runs, minus the `sleep` itself."""
    process = box.start(["sleep", "30"], env={}, timeout_s=60)
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            members = [psutil.Process(pid) for pid in box.leftover_pids()]
            if any(p.name() == "sleep" for p in members):
                return len(members) - 1
            time.sleep(0.01)
        raise RuntimeError("the sleep never started")
    finally:
        process.kill()


def _grading_samples(reps: int, ballast_mb: int = 0) -> dict[str, list[float]]:
    """Per-rep CPU seconds of one grading command and of one episode's verify + close; `ballast_mb` of
    touched memory first, as an env process that holds a model or a trainer has."""
    global _CPU
    ballast = bytearray(ballast_mb << 20)
    for i in range(0, len(ballast), 4096):
        ballast[i] = 1
    from bench_episode import CpuGroup

    _CPU = CpuGroup()
    if _CPU.path is None:
        raise SystemExit(f"--grading needs a writable cpuacct cgroup (root); this machine offers {_CPU.kind}")
    from openenv.harness.tasks import builtin_task

    task = builtin_task("fix-temperature-conversion")
    bare = task.model_copy(update={"test_command": "true"})
    port = free_port()
    samples: dict[str, list[float]] = {}

    def add(name: str, cpu: tuple[float, float]) -> None:
        samples.setdefault(f"{name}: own", []).append(cpu[0])
        samples.setdefault(f"{name}: children", []).append(cpu[1])
        samples.setdefault(f"{name}: total", []).append(cpu[0] + cpu[1])

    with LocalSandbox(forward_ports=(port,)) as box:
        box.end_agent()
        box.run(["true"])  # warm
        samples["processes around a command"] = [float(_processes_around_a_command(box))]
        for _ in range(reps):
            add("grading command", _cpu_of(lambda: box.run(["sh", "-c", "true"])))
    for _ in range(reps):
        for label, graded in (("verify+close, task tests", task), ("verify+close, `true` as tests", bare)):
            _one_grading(label, graded, port, add)
    _CPU.close()
    del ballast
    return samples


def _one_grading(label: str, task: Any, port: int, add: Callable[[str, tuple[float, float]], None]) -> None:
    """One episode's grading: the agent (a setup command, a harness that exited leaving a `setsid`
    daemon) ended by `verify`, the tests run and scored, then `close()`."""
    from openenv.harness.environment import stage_workspace
    from openenv.harness.verifier import verify

    box = LocalSandbox(forward_ports=(port,))
    try:
        stage_workspace(box, task)
        box.run(["true"])  # a harness's setup command
        # the agent: exits before grading, as a harness does, leaving a daemon behind
        box.start(["sh", "-c", "setsid sleep 300 & exit 0"], env={}, timeout_s=120).wait(30)
        verdicts: list[Any] = []
        add(f"{label}: verify", _cpu_of(lambda: verdicts.append(verify(box, task))))
        add(f"{label}: close", _cpu_of(box.close))
        if task.test_command != "true" and verdicts[0].status != "scored":
            raise RuntimeError(f"the task's tests did not score: {verdicts[0]}")
    finally:
        box.close()


def _grading(reps: int, rounds: int, against: str | None, ballast_mb: int = 0) -> list[dict[str, Any]]:
    """Grading samples of this tree, and of `against` in alternating subprocesses; medians in ms."""
    trees = {"this tree": str(Path(__file__).resolve().parents[1])}
    if against:
        trees["against"] = str(Path(against).resolve())
    pooled: dict[str, dict[str, list[float]]] = {name: {} for name in trees}
    for _ in range(rounds):
        for name, tree in trees.items():
            out = subprocess.run(
                [
                    sys.executable,
                    str(Path(__file__).resolve()),
                    *("--grading-samples", str(reps), "--ballast-mb", str(ballast_mb)),
                ],
                env={**os.environ, "PYTHONPATH": tree},
                cwd="/",
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            for key, values in json.loads(out.splitlines()[-1]).items():
                pooled[name].setdefault(key, []).extend(values)
    rows = []
    for key in pooled["this tree"]:
        row: dict[str, Any] = {"what": key}
        for name in trees:
            values = pooled[name].get(key, [])
            row[name] = round(statistics.median(values) * (1 if key.startswith("processes") else 1000), 1)
        if against and row["against"]:
            row["ratio"] = round(row["this tree"] / row["against"], 2)
        rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--episode-reps", type=int, default=3)
    parser.add_argument("--harness", default="pi", help="harness for the first-request row ('' to skip)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--grading", action="store_true", help="measure grading's CPU instead (4. and 5.)")
    parser.add_argument("--rounds", type=int, default=3, help="--grading: alternating rounds per tree")
    parser.add_argument("--against", help="--grading: another checkout whose openenv to compare with")
    parser.add_argument(
        "--ballast-mb", type=int, default=0, help="--grading: memory the measuring process holds"
    )
    parser.add_argument("--grading-samples", type=int, help=argparse.SUPPRESS)  # one round, in-process
    args = parser.parse_args()
    logging.getLogger("openenv.sandbox").setLevel(logging.ERROR)  # the opt-out warnings, once per sandbox
    if args.grading_samples:
        print(json.dumps(_grading_samples(args.grading_samples, args.ballast_mb)))
        return
    if args.grading:
        load = os.getloadavg()[0]
        rows = _grading(args.reps, args.rounds, args.against, args.ballast_mb)
        if args.json:
            print(json.dumps({"load_1m_before": load, "rows": rows}))
            return
        cols = ["this tree", *(["against", "ratio"] if args.against else [])]
        print(
            f"1-minute load average at the start: {load:.2f}; ballast {args.ballast_mb} MB; CPU in ms (median)\n"
        )
        print("| what | " + " | ".join(cols) + " |\n|---|" + "---|" * len(cols))
        for row in rows:
            print(f"| {row['what']} | " + " | ".join(str(row.get(c, "")) for c in cols) + " |")
        return
    rows = []
    makers = _makers(free_port())
    for title, measure in (
        ("sandbox + first command", lambda m: [_first_command(m) for _ in range(args.reps)]),
        ("run(['true'])", lambda m: _short_command(m, args.reps)),
    ):
        results = {label: measure(make) for label, make in makers.items()}
        base = statistics.median(next(iter(results.values())))
        rows += [_row(f"{title}: {label}", times, base) for label, times in results.items()]
    if args.harness:
        from openenv.capture.backends.local import LocalBackend
        from openenv.capture.server import CaptureServer
        from openenv.models import tiny_model_path

        model = tiny_model_path()
        server = CaptureServer(backend=LocalBackend(model), model=model).start()
        try:
            base_times = _first_request(args.harness, server, args.episode_reps, "none")
            isolated = _first_request(args.harness, server, args.episode_reps, "bwrap")
        finally:
            server.stop()
        base = statistics.median(base_times)
        rows += [
            _row(f"{args.harness} first model request: none (baseline)", base_times, base),
            _row(f"{args.harness} first model request: bwrap + cgroup, loopback", isolated, base),
        ]
    if args.json:
        print(json.dumps(rows))
        return
    print("| what | median ms | p90 ms | x baseline |\n|---|---|---|---|")
    for row in rows:
        print(f"| {row['what']} | {row['median_ms']} | {row['p90_ms']} | {row['ratio']} |")


if __name__ == "__main__":
    main()
