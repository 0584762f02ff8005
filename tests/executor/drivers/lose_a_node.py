"""Driver (inside the cluster's namespace): kill the worker node's raylet while its episode runs.

argv: tiny model folder, vLLM URL, the raylet PID of the node at 127.0.0.2. One GRPO
group of 2 oracle pi episodes goes to the two workers (one per node); once the episode on 127.0.0.2
is under way its raylet is SIGKILLed. Prints one JSON line with the group's outcome, the executor's
counts, and what is left of every worker's sandboxes after close().
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from types import SimpleNamespace

from openenv.capture.engine import EngineSpec
from openenv.harness.sandbox.local import sandboxed_processes
from openenv.train.rollout import HarnessRollout, RolloutConfig

model, url, raylet = sys.argv[1], sys.argv[2], int(sys.argv[3])
trainer = SimpleNamespace(
    state=SimpleNamespace(global_step=0),
    num_generations=2,
    num_generations_eval=2,
    model=SimpleNamespace(training=True),
    processing_class=None,
)
rollout = HarnessRollout(
    RolloutConfig(
        harness="pi",
        engine=EngineSpec.of("vllm", model=model, vllm_url=url),
        policy="oracle",
        executor="ray",
        ray_address="auto",
    )
)
executor = rollout.executor(trainer)
plan = rollout.plan(["fix-binary-search"] * 2, trainer)[0]
started = time.monotonic()
future = rollout.start_group(plan, trainer)
killed_during = None
deadline = time.monotonic() + 120
while time.monotonic() < deadline:
    running = executor.running()
    if any(ip == "127.0.0.2" for ip, _ in running):
        time.sleep(1.0)  # let the harness get going on that node
        killed_during = [label for ip, label in executor.running() if ip == "127.0.0.2"]
        os.kill(raylet, signal.SIGKILL)
        break
    time.sleep(0.05)
outcome = future.result(timeout=300)
workers = executor.workers()
lost = executor.lost
rollout.close()
time.sleep(1.0)
leftover_procs = sorted(p.pid for w in workers for p in sandboxed_processes(int(w["pid"])))
leftover_dirs = sorted(str(p) for w in workers for p in Path(w["tmp"]).glob("openenv-*"))
print(
    json.dumps(
        {
            "killed_during": killed_during,
            "attempts": outcome.attempts,
            "masked": outcome.masked,
            "errors": [r.error for r in outcome.results],
            "rewards": [r.reward for r in outcome.results],
            "nodes": [executor_node for executor_node in (r.node for r in outcome.results)],
            "worker_ips": {w["node_id"]: w["node_ip"] for w in workers},
            "lost": lost,
            "trajectories": [r.trajectory for r in outcome.results],
            "leftover_processes": leftover_procs,
            "leftover_sandbox_dirs": leftover_dirs,
            "seconds": round(time.monotonic() - started, 1),
        }
    )
)
