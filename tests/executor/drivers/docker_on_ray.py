"""Driver (inside the cluster's namespace): Docker sandboxes on the Ray workers, labelled and swept.

argv: vLLM URL, run id, results folder. Prints JSON lines on stdout:

1. `eval`: two oracle pi episodes with `sandbox="docker"` on `RayExecutor(run_id=RUN)` (one per node):
   the rewards, the nodes, and the labels of every openenv container seen while they ran (polled).
2. `held`: one job per worker opens a Docker sandbox and a local one, each running a process, and holds
   them. One worker is then SIGKILLed; the line says which containers were up, which were left once the
   executor noticed the death (the live worker sweeps the dead one's), and the local sandbox processes
   left. Then the driver waits: the test sends it SIGTERM, and `RayExecutor.close()` (installed on
   SIGTERM) must leave no container of the run, no sandbox process or folder, and no worker.

The harness in a container reaches its worker's proxy through a unix socket mounted into the container
(`--network none`); the Docker daemon lives outside the namespace but shares the filesystem, so nothing
leaves loopback.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker

from openenv.capture.engine import EngineSpec
from openenv.eval import EvalPlan, run_eval
from openenv.executor import WorkerContext
from openenv.executor.cluster import RayExecutor
from openenv.harness.sandbox.local import sandboxed_processes
from openenv.harness.sandbox.sweeper import KIND_LABEL, OWNER_LABEL, RUN_LABEL

url, run, out = sys.argv[1], sys.argv[2], Path(sys.argv[3])
client = docker.from_env()


def containers() -> list[Any]:
    return client.containers.list(
        all=True, sparse=True, filters={"label": [KIND_LABEL, f"{RUN_LABEL}={run}"]}
    )


@dataclass(frozen=True)
class HoldSandboxes:
    """Opens a Docker sandbox and a local one on its worker, each running a process, and keeps them
    until the worker goes."""

    label: str = "hold"

    def run(self, context: WorkerContext) -> str:
        from openenv.harness.sandbox.docker import DockerSandbox
        from openenv.harness.sandbox.local import LocalSandbox

        local, docker_box = LocalSandbox(), None
        held = [
            local,
            local.start(["sleep", "600"], env={}, timeout_s=600),
        ]  # first: up once the container is
        docker_box = DockerSandbox()
        held += [docker_box, docker_box.start(["sleep", "600"], env={}, timeout_s=600)]
        time.sleep(600)
        return f"held {len(held)}"

    def lost(self, reason: str) -> str:
        return reason


plan = EvalPlan(
    harnesses=["pi"],
    tasks=["fix-temperature-conversion"],
    policy="oracle",
    repeats=2,
    engine=EngineSpec.of("vllm", vllm_url=url),
    sandbox="docker",
)
executor = RayExecutor("auto", engine=plan.engine, harnesses=plan.harnesses, run_id=run, sandbox="docker")
seen: dict[str, dict[str, str]] = {}
everyone: dict[str, dict[str, str]] = {}  # every openenv container the workers made, labelled or not
running = True


def watch() -> None:
    while running:
        pids = {w["pid"] for w in executor.workers()}
        for c in client.containers.list(all=True, sparse=True, filters={"label": KIND_LABEL}):
            labels = c.attrs.get("Labels") or {}
            if labels.get(OWNER_LABEL, "").split("/")[1] in pids:
                everyone[c.id] = labels
        for c in containers():
            seen[c.id] = c.attrs.get("Labels") or {}
        time.sleep(0.2)


watcher = threading.Thread(target=watch, daemon=True)
watcher.start()
results = run_eval(plan, out, executor=executor)
running = False
watcher.join()
print(
    json.dumps(
        {
            "phase": "eval",
            "rewards": [r.summary.reward for r in results],
            "errors": [r.error for r in results],
            "nodes": sorted({r.node or "" for r in results}),
            "worker_pids": sorted(w["pid"] for w in executor.workers()),
            "labels": list(seen.values()),
            "workers_containers": list(everyone.values()),
            "left_after_eval": len(containers()),
        }
    ),
    flush=True,
)

holds = [executor.submit(HoldSandboxes()) for _ in range(executor.slots)]
deadline = time.monotonic() + 120
while (
    len([c for c in containers() if c.status == "running"]) < executor.slots and time.monotonic() < deadline
):
    time.sleep(0.2)
up = {c.attrs["Labels"][OWNER_LABEL]: c.id for c in containers()}
victim = next(w for w in executor.workers() if w["node_ip"] == "127.0.0.2")
os.kill(int(victim["pid"]), signal.SIGKILL)
deadline = time.monotonic() + 60
while (
    any(c.attrs["Labels"][OWNER_LABEL] == victim["owner"] for c in containers())
    and time.monotonic() < deadline
):
    time.sleep(0.2)
left = {c.attrs["Labels"][OWNER_LABEL]: c.id for c in containers()}
local_up = {
    w["pid"]: len(sandboxed_processes(int(w["pid"])))
    for w in executor.workers()
    if w["owner"] in up and w["owner"] != victim["owner"]
}
print(
    json.dumps(
        {
            "phase": "held",
            "up": up,
            "victim": victim["owner"],
            "left": left,
            "lost": executor.lost,
            "victim_local_left": [p.pid for p in sandboxed_processes(int(victim["pid"]))],
            "live_local": local_up,
            "workers": [w["pid"] for w in executor.workers()],
        }
    ),
    flush=True,
)
time.sleep(600)  # the test sends SIGTERM
