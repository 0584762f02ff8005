"""A task image in the local sandbox without a daemon: unpacked-root cache miss vs hit, first vs warm
episode start, side by side with Docker's own `docker run` of the same image, in one run.

    .venv/bin/python bench/bench_local_image.py [--reps 5] [--miss-reps 3] [--base openenv/base:latest]

An image is built FROM `--base` (a marker file and a workdir with one file), pushed to a loopback registry
(Debian's `docker-registry`) and removed from the engine. Rows, median and p90:

1. **rootfs get, miss**: `RootfsCache.get(ref)` on an empty cache (skopeo fetch + umoci unpack);
2. **rootfs get, hit**: the same on a cache that has the digest (a tag seen before: no network);
3. **first episode start**: a new cache, the local sandbox over the image, its workdir copied, one
   command (`true`) run to its end;
4. **warm episode start**: the same with the root cached;
5. **local sandbox on the host system** (no image): sandbox + `true`, for scale;
6. **docker, first**: `docker pull` + `docker run --rm --network none IMAGE true` after `docker rmi`;
7. **docker, warm**: `docker run --rm --network none IMAGE true` with the image present (the baseline).
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from openenv.harness.sandbox.local import LocalSandbox
from openenv.harness.sandbox.local_image import local_image_factory
from openenv.harness.sandbox.rootfs import RootfsCache
from openenv.harness.tasks.model import Task
from openenv.testing.registry import LoopbackRegistry


def _p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]


def _timed(fn: Callable[[], object], reps: int) -> list[float]:
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def _image(base: str, work: Path) -> str:
    (work / "main.py").write_text("print('hi')\n")
    (work / "Dockerfile").write_text(
        f"FROM {base}\nUSER root\nRUN echo bench > /etc/bench-marker && mkdir -p /srv/app\n"
        "COPY main.py /srv/app/main.py\nWORKDIR /srv/app\n"
    )
    tag = "openenv-bench/local-image:1"
    subprocess.run(
        ["docker", "build", "-q", "--network", "none", "-t", tag, str(work)], check=True, capture_output=True
    )
    return tag


def _episode(task: Task, cache_root: Path) -> None:
    make = local_image_factory(task, cache=RootfsCache(cache_root))
    with make(()) as box:
        result = box.run(["sh", "-c", ":"])
        assert result.exit_code == 0, result.output


def _host_episode() -> None:
    with LocalSandbox() as box:
        assert box.run(["sh", "-c", ":"]).exit_code == 0


def _docker_run(ref: str) -> None:
    subprocess.run(
        ["docker", "run", "--rm", "--network", "none", ref, "sh", "-c", ":"], check=True, capture_output=True
    )


def _docker_first(ref: str) -> None:
    subprocess.run(["docker", "pull", "-q", ref], check=True, capture_output=True)
    _docker_run(ref)


def _row(label: str, times: list[float], base: float) -> dict[str, Any]:
    median = statistics.median(times)
    return {
        "what": label,
        "n": len(times),
        "median_ms": round(median * 1000, 1),
        "p90_ms": round(_p90(times) * 1000, 1),
        "ratio": round(median / base, 3) if base else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--miss-reps", type=int, default=3)
    parser.add_argument("--base", default="openenv/base:latest")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    logging.getLogger("openenv.sandbox").setLevel(logging.ERROR)
    with tempfile.TemporaryDirectory(prefix="openenv-bench-image-") as tmp:
        work = Path(tmp)
        tag = _image(args.base, work)
        with LoopbackRegistry(work / "registry") as registry:
            ref = registry.push(tag, "bench/local-image:1")
            subprocess.run(["docker", "rmi", ref, tag], check=True, capture_output=True)
            task = Task(id="bench", instruction="x", tests={"test.sh": "true"}, image=ref, workdir="/srv/app")
            counter = iter(range(10_000))
            fresh = lambda: work / f"cache-{next(counter)}"
            results: dict[str, list[float]] = {}
            results["rootfs get, miss (skopeo fetch + umoci unpack)"] = _timed(
                lambda: RootfsCache(fresh()).get(ref), args.miss_reps
            )
            warm_cache = fresh()
            RootfsCache(warm_cache).get(ref)
            results["rootfs get, hit (cached digest, no network)"] = _timed(
                lambda: RootfsCache(warm_cache).get(ref), args.reps * 4
            )
            results["local sandbox over the image: first episode start (miss)"] = _timed(
                lambda: _episode(task, fresh()), args.miss_reps
            )
            results["local sandbox over the image: warm episode start (hit)"] = _timed(
                lambda: _episode(task, warm_cache), args.reps
            )
            results["local sandbox on the host system (no image)"] = _timed(_host_episode, args.reps)

            def docker_first() -> None:
                subprocess.run(["docker", "rmi", ref], capture_output=True)
                _docker_first(ref)

            results["docker: first (docker pull + docker run)"] = _timed(docker_first, args.miss_reps)
            results["docker: warm (docker run, image present; baseline)"] = _timed(
                lambda: _docker_run(ref), args.reps
            )
            subprocess.run(["docker", "rmi", ref], capture_output=True)
    base = statistics.median(results["docker: warm (docker run, image present; baseline)"])
    rows = [_row(label, times, base) for label, times in results.items()]
    miss = statistics.median(results["rootfs get, miss (skopeo fetch + umoci unpack)"])
    hit = statistics.median(results["rootfs get, hit (cached digest, no network)"])
    if args.json:
        print(json.dumps({"rows": rows, "miss_over_hit": round(miss / hit, 1)}))
        return
    print("| what | n | median ms | p90 ms | x docker run (warm) |\n|---|---:|---:|---:|---:|")
    for row in rows:
        print(f"| {row['what']} | {row['n']} | {row['median_ms']} | {row['p90_ms']} | {row['ratio']} |")
    print(f"\nunpacked-root cache: a miss costs {miss / hit:.0f}x a hit")


if __name__ == "__main__":
    main()
