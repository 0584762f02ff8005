"""What the Ray executor adds per episode over the thread executor, side by side, in the same run.

    .venv/bin/python bench/bench_scale.py [--episodes 24] [--turns 4] [--json]

Both executors run the same stand-in episode: a job that opens a capture session on its place's proxy,
plays a harness for `--turns` turns (a real HTTP client posting a growing chat with a tool to
`/v1/chat/completions`), and returns the episode's training rows, as `TrainingEpisodeJob` does. The
engine is `bench/engines.py instant` (answers at once), so what is left is our cost: the proxy, the
executor, and for Ray the object store, the actor calls and the worker processes.

- **thread**: `ThreadExecutor(2)` here, one capture server shared by the jobs.
- **ray**: `RayExecutor` on a real 2-node cluster (127.0.0.1 + 127.0.0.2, one slot each) in a
  loopback-only network namespace (`openenv.testing.ray_cluster`), the driver inside it too.

Per episode it reports: wall time seen by the driver with one episode in flight (the added latency),
episodes/s with both slots busy, driver CPU, the whole cluster's CPU (raylets, GCS and workers
included), and the bytes that cross the object store (the job out, the result back). Needs root
(network namespaces) and `pip install 'openenv-harness[ray]'`.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from openenv.core.net import free_port
from openenv.executor import EngineSpec, WorkerContext

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "tool_0",
            "description": "run a shell command",
            "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
        },
    }
]


@dataclass(frozen=True)
class StandInEpisode:
    """A harness stand-in: `turns` chat turns through the place's proxy, then the episode's rows."""

    engine: EngineSpec
    turns: int
    label: str = "stand-in"

    def run(self, context: WorkerContext) -> dict[str, Any]:
        import httpx

        server = context.capture(self.engine)
        assert server is not None
        session = server.open_session(mode="auto")
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": "You are a coding agent. " * 40},
            {"role": "user", "content": "Fix the failing test in module.py."},
        ]
        with httpx.Client(base_url=session.base_url, trust_env=False, timeout=30) as client:
            for turn in range(self.turns):
                reply = client.post(
                    "/v1/chat/completions",
                    json={"model": "tiny", "messages": messages, "tools": TOOLS, "max_tokens": 64},
                )
                reply.raise_for_status()
                message = reply.json()["choices"][0]["message"]
                calls = message.get("tool_calls") or []
                messages.append({"role": "assistant", "content": message.get("content"), "tool_calls": calls})
                for call in calls:
                    messages.append(
                        {"role": "tool", "tool_call_id": call["id"], "content": f"output {turn}\n" * 20}
                    )
        rows = [row.model_dump(mode="json") for row in session.sequences()]
        server.close_session(session.token)
        return {"rows": rows, "node": context.node_id}

    def lost(self, reason: str) -> dict[str, Any]:
        return {"rows": [], "error": reason}


def _namespace_cpu_s() -> float:
    """CPU seconds of every process in this network namespace (on Ray: the whole cluster and the driver)."""
    import psutil

    mine = os.readlink("/proc/self/ns/net")
    procs = []
    for proc in psutil.process_iter():
        try:
            if os.readlink(f"/proc/{proc.pid}/ns/net") == mine:
                procs.append(proc)
        except OSError:
            continue
    return _cpu_s(procs)


def _measure(executor: Any, engine: EngineSpec, episodes: int, turns: int) -> dict[str, float]:
    """Sequential (added latency), then all at once (throughput); driver and all CPU, bytes per episode."""
    import cloudpickle

    job = StandInEpisode(engine, turns)
    executor.submit(job).result()  # warm: servers started, tokenizer loaded, connections open
    one = []
    for _ in range(max(4, episodes // 4)):
        start = time.perf_counter()
        result = executor.submit(job).result()
        one.append(time.perf_counter() - start)
        assert result["rows"], result
    all0, cpu0, start = _namespace_cpu_s(), time.process_time(), time.perf_counter()
    results = [f.result() for f in [executor.submit(job) for _ in range(episodes)]]
    wall, cpu, all_cpu = time.perf_counter() - start, time.process_time() - cpu0, _namespace_cpu_s() - all0
    assert all(r["rows"] for r in results)
    return {
        "latency_ms": 1000 * sorted(one)[len(one) // 2],
        "episodes_per_s": episodes / wall,
        "driver_cpu_ms": 1000 * cpu / episodes,
        "cluster_cpu_ms": 1000 * all_cpu / episodes,
        "job_bytes": len(cloudpickle.dumps(job)),
        "result_bytes": len(pickle.dumps(results[0])),
        "nodes": len({r["node"] for r in results}),
    }


def _ray_driver(url: str, episodes: int, turns: int) -> None:
    from openenv.executor.cluster import RayExecutor

    engine = EngineSpec(vllm_urls=(url,))
    executor = RayExecutor("auto", engine=engine, harnesses=[])
    try:
        result = _measure(executor, engine, episodes, turns)
        import psutil

        rss = [psutil.Process(int(w["pid"])).memory_info().rss / 1e6 for w in executor.workers()]
        result["worker_rss_mb"] = max(rss)
    finally:
        executor.close()
    print(json.dumps({**result, "driver_total_cpu_s": time.process_time()}))


def _cpu_s(procs: list[Any]) -> float:
    total = 0.0
    for proc in procs:
        try:
            times = proc.cpu_times()
            total += times.user + times.system + times.children_user + times.children_system
        except Exception:
            continue
    return total


def _real_job_bytes() -> dict[str, float]:
    """What real jobs and results weigh pickled: a training job on a built-in task, and a row per token."""
    import cloudpickle

    from openenv.capture.canonical import SamplingParams
    from openenv.capture.trajectory import SequenceRow
    from openenv.harness.episode_settings import EpisodeSettings
    from openenv.harness.tasks import load_task_set
    from openenv.train.episode import TrainingEpisodeResult
    from openenv.train.episode_job import TrainingEpisodeJob
    from openenv.train.sequences import TrainedRows

    task = load_task_set("builtin")[0]
    job = TrainingEpisodeJob(
        harness="pi",
        task=task,
        policy="sample",
        engine=EngineSpec(vllm_urls=("http://x:8000",)),
        settings=EpisodeSettings(sampling=SamplingParams(max_tokens=256, temperature=1.0)),
    )
    n = 30000
    row = SequenceRow(
        prompt_ids=list(range(1000, 1000 + n // 10)),
        completion_ids=list(range(n)),
        logprobs=[-0.123456789] * n,
        env_mask=[1] * n,
        turn_ids=["t"] * 40,
    )
    result = TrainingEpisodeResult(harness="pi", task_id=task.id, policy="sample", trained=TrainedRows(row))
    return {"training": len(cloudpickle.dumps(job)), "row_bytes_per_token": len(pickle.dumps(result)) / n}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=24)
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--ray-driver", metavar="URL", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.ray_driver:
        _ray_driver(args.ray_driver, args.episodes, args.turns)
        return

    from openenv.capture.backends.vllm import VLLMBackend
    from openenv.capture.server import CaptureServer
    from openenv.executor import ThreadExecutor
    from openenv.models import tiny_model_path
    from openenv.testing.ray_cluster import LoopbackRayCluster

    port = free_port()
    engine_proc = subprocess.Popen(
        [sys.executable, str(REPO / "bench" / "engines.py"), "instant", "--port", str(port)]
    )
    url = f"http://127.0.0.1:{port}"
    try:
        import httpx

        for _ in range(200):
            try:
                if httpx.get(f"{url}/health", timeout=1, trust_env=False).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        engine = EngineSpec(vllm_urls=(url,))
        server = CaptureServer(backend=VLLMBackend(url), model=tiny_model_path()).start()
        threads = ThreadExecutor(2, capture=lambda _spec: server)
        try:
            thread = _measure(threads, engine, args.episodes, args.turns)
        finally:
            threads.close()
            server.stop()
        thread["cluster_cpu_ms"] = thread["driver_cpu_ms"]  # one process does it all
        env = {"PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
        with LoopbackRayCluster(workers=1, slots=1, env=env, forward={port: port}) as cluster:
            done = cluster.run(
                [
                    sys.executable,
                    __file__,
                    "--ray-driver",
                    url,
                    "--episodes",
                    str(args.episodes),
                    "--turns",
                    str(args.turns),
                ],
                timeout=600,
            )
            if done.returncode != 0:
                raise SystemExit(f"the Ray driver failed: {done.stderr[-3000:]}")
            ray = json.loads(done.stdout.strip().splitlines()[-1])
            ray["cluster_start_s"] = cluster.started_s
            ray["cluster_rss_mb"] = cluster.memory_mb()
    finally:
        engine_proc.terminate()
        engine_proc.wait(10)
    report = {
        "episodes": args.episodes,
        "turns": args.turns,
        "thread": thread,
        "ray": ray,
        "real_job_bytes": _real_job_bytes(),
        "latency_ratio": ray["latency_ms"] / thread["latency_ms"],
        "throughput_ratio": thread["episodes_per_s"] / ray["episodes_per_s"],
        "load_avg": os.getloadavg(),
    }
    if args.json:
        print(json.dumps(report))
        return
    print(
        f"stand-in episodes of {args.turns} turns, instant engine; ray = 2 nodes x 1 slot in a loopback netns"
    )
    print(f"{'':28}{'thread':>12}{'ray':>12}")
    for key, label in (
        ("latency_ms", "wall per episode, 1 in flight (ms)"),
        ("episodes_per_s", "episodes/s, 2 slots"),
        ("driver_cpu_ms", "driver CPU per episode (ms)"),
        ("cluster_cpu_ms", "all CPU per episode (ms)"),
        ("job_bytes", "job bytes out"),
        ("result_bytes", "result bytes back"),
        ("nodes", "nodes used"),
    ):
        print(f"{label:<36}{thread[key]:>10.1f}{ray[key]:>12.1f}")
    print(
        f"an EpisodeWorker after its episodes: {ray['worker_rss_mb']:.0f} MB RSS; the 2-node cluster: "
        f"{ray['cluster_rss_mb']:.0f} MB"
    )
    print(
        f"a real TrainingEpisodeJob (built-in task): {report['real_job_bytes']['training']} bytes; "
        f"a result row costs {report['real_job_bytes']['row_bytes_per_token']:.1f} bytes per token"
    )
    print(
        f"ray/thread wall per episode: {report['latency_ratio']:.2f}x; thread/ray throughput: "
        f"{report['throughput_ratio']:.2f}x; cluster start {ray['cluster_start_s']} s; load {report['load_avg']}"
    )


if __name__ == "__main__":
    main()
