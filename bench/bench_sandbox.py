"""Sandbox start-up cost: LocalSandbox vs DockerSandbox, measured in the same run.

    .venv/bin/python bench/bench_sandbox.py [--reps 10] [--episode-reps 5] [--harnesses pi,codex,claude-code]

Two measurements, each as median and p90 over repeated runs, with the ratio to the local baseline:

1. **first command**: from constructing the sandbox (with one forwarded proxy port) until a started
   command is running (it touches a file the host polls for). Local is measured with the host network
   and with the loopback-only namespace (the isolation Docker is compared with).
   `docker (warm pool)` takes a sandbox a `WarmPool` started ahead of time.
2. **first model request**: `HarnessEnvironment.reset()` (sandbox, capture session, harness config and
   launch) until the harness's first request reaches the proxy, per harness, on the in-process tiny
   model. The Docker rows pass `sandbox_factory=` (a fresh DockerSandbox, or one from a WarmPool).

Issue targets: Docker reaches the first model request in <= 5 s and in at most 1.5x the local time.
Needs a Docker engine (scripts/install_docker.sh) and the base image (scripts/build_base_image.sh).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

from openenv.core.net import free_port
from openenv.harness.sandbox.base import Sandbox
from openenv.harness.sandbox.docker import DockerSandbox
from openenv.harness.sandbox.docker_episode import sandbox_factory, verify_isolated
from openenv.harness.sandbox.local import LocalSandbox
from openenv.harness.sandbox.pool import WarmPool


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _first_command(make: Callable[[], Sandbox]) -> float:
    start = time.perf_counter()
    sandbox = make()
    try:
        marker = sandbox.workspace / "started"
        sandbox.start(["sh", "-c", f"touch {marker}; sleep 30"], env={}, timeout_s=60)
        while not marker.exists():
            time.sleep(0.002)
        return time.perf_counter() - start
    finally:
        sandbox.close()


def _sandbox_makers(port: int, pool: WarmPool) -> dict[str, Callable[[], Sandbox]]:
    return {
        "local (host network)": lambda: LocalSandbox(forward_ports=(port,)),
        "local (loopback netns)": lambda: LocalSandbox(network="loopback", forward_ports=(port,)),
        "docker": lambda: DockerSandbox(forward_ports=(port,)),
        "docker (warm pool)": pool.take,
    }


def _drain(
    makers: dict[str, Callable[[], Sandbox]], label: str, pool: WarmPool | None, reps: int
) -> list[float]:
    """Time `reps` runs; with a pool, let it refill between runs (episodes are seconds apart in use)."""
    times = []
    for _ in range(reps):
        if pool is not None:
            _await_pool(pool)
        times.append(_first_command(makers[label]))
    return times


def _await_pool(pool: WarmPool, timeout_s: float = 30) -> None:
    deadline = time.perf_counter() + timeout_s
    while pool.waiting == 0 and time.perf_counter() < deadline:
        time.sleep(0.01)


def _first_request(harness: str, server: Any, reps: int, mode: str) -> list[float]:
    from openenv.harness.environment import EpisodeHooks, EpisodeSettings, HarnessEnvironment
    from openenv.harness.install import cache_root
    from openenv.harness.tasks import builtin_task

    task = builtin_task("fix-temperature-conversion")
    times = []
    pool = WarmPool(size=1, forward_ports=(server.port,), mounts=(cache_root(),)) if mode == "pool" else None
    hooks = EpisodeHooks()
    if mode == "docker":
        hooks = EpisodeHooks(sandbox_factory=sandbox_factory(), verifier=verify_isolated)
    elif pool is not None:
        hooks = EpisodeHooks(sandbox_factory=lambda ports: pool.take(), verifier=verify_isolated)
    for _ in range(reps):
        if pool is not None:
            _await_pool(pool)
        env = HarnessEnvironment(
            harness, server=server, settings=EpisodeSettings(network="loopback"), hooks=hooks
        )
        start = time.perf_counter()
        obs = env.reset(task=task)
        times.append(time.perf_counter() - start)
        assert obs.pending is not None, f"{harness} ended before its first request: {obs.output_tail}"
        env.close()
    if pool is not None:
        pool.close()
    return times


def _row(
    table: list[tuple[str, str, float, float, float]],
    what: str,
    label: str,
    times: list[float],
    baseline: list[float],
) -> None:
    median = statistics.median(times)
    table.append((what, label, median, _percentile(times, 0.9), median / statistics.median(baseline)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--episode-reps", type=int, default=5)
    parser.add_argument("--harnesses", default="pi,codex,claude-code")
    args = parser.parse_args()

    table: list[tuple[str, str, float, float, float]] = []
    port = free_port()
    with WarmPool(size=1, forward_ports=(port,)) as pool:
        makers = _sandbox_makers(port, pool)
        measured = {
            label: _drain(makers, label, pool if "pool" in label else None, args.reps) for label in makers
        }
    for label, times in measured.items():
        _row(table, "first command", label, times, measured["local (loopback netns)"])

    from openenv.capture.backends.local import LocalBackend
    from openenv.capture.server import CaptureServer
    from openenv.harness.catalog import get_spec
    from openenv.harness.install import install_status
    from openenv.models import tiny_model_path

    model = tiny_model_path()
    server = CaptureServer(backend=LocalBackend(model), model=model).start()
    try:
        for harness in [h for h in args.harnesses.split(",") if h]:
            if not install_status(get_spec(harness)).ready:
                print(f"skipping {harness}: not installed")
                continue
            local = _first_request(harness, server, args.episode_reps, "local")
            _row(table, f"first request: {harness}", "local (loopback netns)", local, local)
            for mode, label in (("docker", "docker"), ("pool", "docker (warm pool)")):
                _row(
                    table,
                    f"first request: {harness}",
                    label,
                    _first_request(harness, server, args.episode_reps, mode),
                    local,
                )
    finally:
        server.stop()

    print(f"\n{'measurement':<30} {'sandbox':<24} {'median s':>9} {'p90 s':>8} {'x local':>8}")
    for what, label, median, p90, ratio in table:
        print(f"{what:<30} {label:<24} {median:>9.3f} {p90:>8.3f} {ratio:>8.2f}")
    print(
        f"\n(first command: {args.reps} reps; first request: {args.episode_reps} reps per harness; "
        f"baseline = local in the loopback netns; targets: docker <= 5 s and <= 1.5x local)"
    )


if __name__ == "__main__":
    main()
