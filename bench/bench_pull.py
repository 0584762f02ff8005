"""Registry images: first-episode vs warm-episode start in the Docker sandbox, beside Docker's own `docker run`.

    .venv/bin/python bench/bench_pull.py [--reps 3] [--layer-mb 64] [--write docs/benchmarks.md]

A task image (the offline base plus one layer of `--layer-mb` random bytes, so a pull moves real data) is
pushed to a registry on 127.0.0.1 (`openenv.testing.registry.LoopbackRegistry`). Measured in the same run,
alternating, `--reps` times each:

- **docker sandbox, first episode**: the image is not in the engine. `sandbox_factory(task)` (pull through
  the engine, single-flight, ledger) and the sandbox's start until a command it started is running.
- **docker sandbox, warm episode**: the same with the image present.
- **`docker run`, first / warm**: `docker run --rm --network none IMAGE true` (the CLI pulls a missing image
  itself), the baseline each row is divided by.

With `--write`, the section `## 9. Registry images` of that markdown file is replaced (or appended).
Needs a Docker engine, the base image and `docker-registry` (scripts/install.sh --all).
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import docker

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from openenv.harness.sandbox.docker_episode import sandbox_factory
from openenv.harness.sandbox.images import OFFLINE_BASE
from openenv.harness.tasks import load_harbor_task
from openenv.harness.tasks.model import Task
from openenv.testing.registry import LoopbackRegistry

HEADING = "## 9. Registry images"


def _image(client: docker.DockerClient, tag: str, layer_mb: int) -> None:
    dockerfile = (
        f"FROM {OFFLINE_BASE}\nUSER root\nRUN head -c {layer_mb}M /dev/urandom > /opt/blob && "
        "mkdir -p /app && echo 'print(1)' > /app/main.py\nWORKDIR /app\n"
    )
    client.images.build(
        fileobj=io.BytesIO(dockerfile.encode()), tag=tag, pull=False, network_mode="none", rm=True
    )


def _task(folder: Path, reference: str) -> Task:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "task.toml").write_text(
        f'schema_version = "1.4"\n[environment]\ndocker_image = "{reference}"\n'
    )
    (folder / "instruction.md").write_text("Nothing to do.\n")
    (folder / "tests").mkdir(exist_ok=True)
    (folder / "tests" / "test.sh").write_text("#!/bin/sh\necho 1 > /logs/verifier/reward.txt\n")
    return load_harbor_task(folder)


def _forget(client: docker.DockerClient, reference: str) -> None:
    try:
        client.images.remove(reference, force=True)
    except docker.errors.ImageNotFound:
        pass


def _sandbox_start(client: docker.DockerClient, task: Task) -> float:
    start = time.perf_counter()
    box = sandbox_factory(task, client=client)(())
    try:
        marker = box.workspace / "started"  # the host side of the workdir mount
        box.start(["sh", "-c", f"touch {box.workdir}/started; sleep 30"], env={}, timeout_s=60)
        deadline = time.perf_counter() + 120
        while not marker.exists():
            if time.perf_counter() > deadline:
                raise RuntimeError(f"the first command never ran in {box.workdir}")
            time.sleep(0.002)
        return time.perf_counter() - start
    finally:
        box.close()


def _docker_run(reference: str) -> float:
    start = time.perf_counter()
    subprocess.run(
        ["docker", "run", "--rm", "--network", "none", reference, "true"], check=True, capture_output=True
    )
    return time.perf_counter() - start


def measure(reps: int, layer_mb: int) -> dict[str, list[float]]:
    client = docker.from_env()
    times: dict[str, list[float]] = {
        k: [] for k in ("sandbox first", "sandbox warm", "run first", "run warm")
    }
    with tempfile.TemporaryDirectory(prefix="openenv-bench-pull-") as tmp:
        os.environ["OPENENV_PULLED_DIR"] = f"{tmp}/pulled"  # the bench's pulls are not the user's ledger
        os.environ["OPENENV_LOCK_DIR"] = f"{tmp}/locks"
        with LoopbackRegistry(Path(tmp) / "registry") as registry:
            local = f"openenv-bench/pull-{uuid.uuid4().hex[:8]}:1"
            _image(client, local, layer_mb)
            reference = registry.push(local, local)
            _forget(client, local)
            task = _task(Path(tmp) / "task", reference)
            try:
                for _ in range(reps):  # alternate, so load drifts hit both the same
                    _forget(client, reference)
                    times["run first"].append(_docker_run(reference))
                    times["run warm"].append(_docker_run(reference))
                    _forget(client, reference)
                    times["sandbox first"].append(_sandbox_start(client, task))
                    times["sandbox warm"].append(_sandbox_start(client, task))
            finally:
                _forget(client, reference)
    return times


def section(times: dict[str, list[float]], reps: int, layer_mb: int) -> str:
    load = os.getloadavg()
    first, warm = statistics.median(times["run first"]), statistics.median(times["run warm"])
    rows = [
        ("`docker run --rm IMAGE true`, image not in the engine (the CLI pulls)", "run first", first),
        ("`docker run --rm IMAGE true`, image present", "run warm", warm),
        ("docker sandbox, first episode (pull + sandbox + first command)", "sandbox first", first),
        ("docker sandbox, warm episode (sandbox + first command)", "sandbox warm", warm),
    ]
    lines = [
        f"{HEADING}: first vs warm episode start (issue 45)",
        "",
        f"`bench/bench_pull.py --reps {reps} --layer-mb {layer_mb}` ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"load average {load[0]:.1f}/{load[1]:.1f}/{load[2]:.1f} on {os.cpu_count()} cores). A task image (the "
        f"offline base plus a {layer_mb} MB layer) on a `docker-registry` on 127.0.0.1; each first start begins "
        "with the image removed from the engine. Baseline: Docker's own `docker run` of the same image in the "
        "same run, first against first and warm against warm.",
        "",
        "| what | median s | min s | max s | x docker run |",
        "|---|---|---|---|---|",
    ]
    for what, key, baseline in rows:
        values = times[key]
        lines.append(
            f"| {what} | {statistics.median(values):.3f} | {min(values):.3f} | {max(values):.3f} | "
            f"{statistics.median(values) / baseline:.2f} |"
        )
    lines += [
        "",
        "A warm sandbox start does more than `docker run ... true`: the workdir is copied out of the "
        "image for the episode's workspace, the proxy forwarder is started and a command is run in the "
        "container; the pull itself is the engine's (one per image, however many episodes ask).",
        "",
    ]
    return "\n".join(lines)


def write(path: Path, text: str) -> None:
    doc = path.read_text() if path.exists() else ""
    start = doc.find(HEADING)
    if start < 0:
        doc = doc.rstrip("\n") + "\n\n" + text
    else:
        end = doc.find("\n## ", start + 1)
        doc = doc[:start] + text + ("" if end < 0 else doc[end + 1 :])
    path.write_text(doc)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--layer-mb", type=int, default=64)
    parser.add_argument("--write", type=Path, default=None, help="replace the section in this markdown file")
    args = parser.parse_args()
    text = section(measure(args.reps, args.layer_mb), args.reps, args.layer_mb)
    print(text)
    if args.write is not None:
        write(args.write, text)


if __name__ == "__main__":
    main()
