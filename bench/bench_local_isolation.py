"""What the local sandbox's boundary costs: bubblewrap + cgroup against the same sandbox without them.

    .venv/bin/python bench/bench_local_isolation.py [--reps 10] [--episode-reps 3] [--harness pi]

Measured side by side in one run, median and p90, with the ratio to the unisolated baseline
(`isolation="none"`, host network, no cgroup limits):

1. **sandbox + first command**: constructing a LocalSandbox (one forwarded proxy port) until a started
   command is running (it touches a file the host polls for).
2. **one short command**: `run(["true"])` in a sandbox that exists (start, exit, cleanup).
3. **first model request**: `HarnessEnvironment.reset()` until the harness's first request reaches the
   proxy (in-process tiny model), for `--harness`.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import time
from collections.abc import Callable
from typing import Any

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--episode-reps", type=int, default=3)
    parser.add_argument("--harness", default="pi", help="harness for the first-request row ('' to skip)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    logging.getLogger("openenv.sandbox").setLevel(logging.ERROR)  # the opt-out warnings, once per sandbox
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
