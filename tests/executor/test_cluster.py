"""The Ray executor on a real two-node cluster (127.0.0.1 + 127.0.0.2, loopback-only namespace).

Each test's driver runs inside the namespace; the episodes are real harness CLIs on a real vLLM.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import psutil
import pytest

from openenv.testing.ray_cluster import LoopbackRayCluster
from tests.executor.conftest import MISSING_ON_ONE_NODE

pytestmark = [pytest.mark.slow, pytest.mark.vllm]

DRIVERS = Path(__file__).parent / "drivers"
OPENENV = str(Path(sys.executable).with_name("openenv"))
TASKS = "fix-binary-search"


def _report(stdout: str) -> dict:
    return json.loads(stdout.strip().splitlines()[-1])


def _rows(report: dict) -> dict[tuple[str, str], list[dict]]:
    rows = {}
    for episode in report["episodes"]:
        lines = Path(episode["trajectory"]).read_text().splitlines()
        key = (episode["summary"]["harness"], episode["summary"]["task"])
        rows[key] = [json.loads(line) for line in lines if json.loads(line)["type"] == "sequence"]
    return rows


def _same_row(a: dict, b: dict) -> None:
    for key in ("prompt_ids", "completion_ids", "env_mask"):  # not turn_ids: random per session
        assert a[key] == b[key], key
    assert a["logprobs"] == pytest.approx(b["logprobs"], abs=1e-4)


def test_eval_on_ray_spreads_over_both_nodes_and_gives_the_thread_executors_rows(
    ray_cluster: LoopbackRayCluster, vllm_url: str, tmp_path: Path
):
    common = [
        "eval",
        "--harness",
        "pi,claude-code",
        "--tasks",
        "builtin",
        "--only",
        TASKS,
        "--policy",
        "oracle",
        "--backend",
        "vllm",
        "--vllm-url",
        vllm_url,
        "--json",
    ]
    import subprocess

    # The thread executors' run (outside the namespace) goes on while the Ray run does: neither waits.
    threads = subprocess.Popen(
        [OPENENV, *common, "--concurrency", "2", "--out", str(tmp_path / "threads")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        on_ray = ray_cluster.run(
            [OPENENV, *common, "--ray", "auto", "--out", str(tmp_path / "ray")], timeout=540
        )
        threads_out, threads_err = threads.communicate(timeout=540)
    finally:
        if threads.poll() is None:
            threads.kill()
            threads.wait()
    assert on_ray.returncode == 0, on_ray.stderr[-3000:]
    on_threads = subprocess.CompletedProcess(threads.args, threads.returncode, threads_out, threads_err)
    assert on_threads.returncode == 0, on_threads.stderr[-3000:]
    ray_report, thread_report = _report(on_ray.stdout), _report(on_threads.stdout)
    nodes = {e["node"] for e in ray_report["episodes"]}
    assert len(nodes) >= 2 and not any(n.startswith("local:") for n in nodes)
    assert [r["solved"] for r in ray_report["rows"]] == [r["solved"] for r in thread_report["rows"]] == [1, 1]
    ray_rows, thread_rows = _rows(ray_report), _rows(thread_report)
    assert sorted(ray_rows) == sorted(thread_rows) and len(ray_rows) == 2
    for key, rows in ray_rows.items():
        assert len(rows) == len(thread_rows[key]) >= 1
        for a, b in zip(rows, thread_rows[key], strict=True):
            _same_row(a, b)  # token for token
    # the logs were fetched home from the workers' folders
    assert all(Path(e["trajectory"]).parent == tmp_path / "ray" / "episodes" for e in ray_report["episodes"])


def test_two_grpo_steps_train_with_their_episodes_on_ray_workers(
    ray_cluster: LoopbackRayCluster, vllm_url: str, tiny_model: Path, tmp_path: Path
):
    done = ray_cluster.run(
        [sys.executable, str(DRIVERS / "grpo_on_ray.py"), str(tiny_model), vllm_url, str(tmp_path / "grpo")],
        timeout=540,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["steps"] == 2 and result["changed"]
    # one generation batch of 2 groups x 2 episodes, spread over both workers (one per node)
    assert len(result["nodes"]) == 4 and len(set(result["nodes"])) == 2 and all(result["nodes"])


def test_a_bad_cluster_is_refused_at_start_naming_each_node_and_what_it_lacks(
    ray_cluster: LoopbackRayCluster, vllm_url: str, tmp_path: Path
):
    done = ray_cluster.run(
        [
            sys.executable,
            str(DRIVERS / "bad_cluster.py"),
            vllm_url,
            str(tmp_path / "absent"),
            MISSING_ON_ONE_NODE,
        ],
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    refused = json.loads(done.stdout.strip().splitlines()[-1])
    model = refused["missing_model"]
    assert "127.0.0.1" in model and "127.0.0.2" in model and str(tmp_path / "absent") in model
    assert "engine at http://127.0.0.1:9 is unreachable" in refused["unreachable_engine"]
    assert "--resources" in refused["no_slot_resource"]
    assert "cannot use it" in refused["local_backend"]
    # a CLI installed on the head only: the worker node is named with it, the head is not
    one = refused["cli_missing_on_one_node"]
    assert f"the {MISSING_ON_ONE_NODE} CLI is not installed" in one and "127.0.0.2" in one, one
    assert "127.0.0.1" not in one and "the pi CLI" not in one, one


def test_a_soak_runs_on_the_ray_workers_with_nothing_lost_or_leaked(
    ray_cluster: LoopbackRayCluster, vllm_url: str
):
    done = ray_cluster.run(
        [
            OPENENV,
            "soak",
            "--ray",
            "auto",
            "--episodes",
            "2",
            "--kinds",
            "none,client_retry",
            "--vllm-url",
            vllm_url,
            "--json",
        ],
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "2 soak workers on 2 node(s): 127.0.0.1, 127.0.0.2" in done.stderr
    report = _report(done.stdout)
    assert report["episodes"] == report["ok"] == 2 and set(report["per_kind"]) == {"none", "client_retry"}
    assert (report["lost_turns"], report["duplicate_turns"], report["leaked_processes"]) == (0, 0, 0)
    assert report["replays"] == report["replays_identical"] == 1


def _namespace_procs(cluster: LoopbackRayCluster, needle: str) -> list:  # type: ignore[type-arg]
    found = []
    for proc in cluster.processes():
        try:
            if needle in " ".join(proc.cmdline()):
                found.append(proc)
        except Exception:
            continue
    return found


def _next_json(stream: Any) -> dict:  # type: ignore[type-arg]
    """The driver's next JSON line (Ray's own messages, e.g. about a worker killed on purpose, may come between)."""
    for line in stream:
        if line.startswith("{"):
            return json.loads(line)
    return {}


def test_docker_sandboxes_on_ray_carry_the_run_id_and_are_swept_when_a_worker_dies_and_on_sigterm(
    ray_cluster: LoopbackRayCluster, vllm_url: str, docker_base_image: str, tmp_path: Path
):
    import signal
    import subprocess
    import time
    import uuid

    import docker

    from openenv.harness.sandbox.local import sandboxed_processes
    from openenv.harness.sandbox.sweeper import KIND_LABEL, OWNER_LABEL, RUN_LABEL

    run = f"test-{uuid.uuid4().hex[:8]}"
    client = docker.from_env()

    def left() -> list[str]:
        return [
            c.id
            for c in client.containers.list(
                all=True, sparse=True, filters={"label": [KIND_LABEL, f"{RUN_LABEL}={run}"]}
            )
        ]

    driver = ray_cluster.popen(
        [sys.executable, str(DRIVERS / "docker_on_ray.py"), vllm_url, run, str(tmp_path / "out")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert driver.stdout is not None
        evaluated = _next_json(driver.stdout)
        if evaluated.get("phase") != "eval":
            driver.wait(timeout=30)
            raise AssertionError(f"the driver ended ({driver.returncode}): {driver.stderr.read()[-3000:]}")
        # both episodes solved in containers, one per node
        assert evaluated["rewards"] == [1.0, 1.0] and evaluated["errors"] == [None, None], evaluated
        assert len(evaluated["nodes"]) == 2
        # every container the workers made carries the run id, and they made some
        made = evaluated["workers_containers"]
        assert made and all(labels.get(RUN_LABEL) == run for labels in made), made
        assert {labels[OWNER_LABEL].split("/")[1] for labels in made} == set(evaluated["worker_pids"])
        assert evaluated["left_after_eval"] == 0
        held = _next_json(driver.stdout)
        assert held.get("phase") == "held", held
        assert len(held["up"]) == 2 and held["victim"] in held["up"]
        # the dead worker's container was swept by the live worker; the live worker's is still up
        assert held["lost"] == 1 and list(held["left"]) == [o for o in held["up"] if o != held["victim"]], (
            held
        )
        # and its local sandbox's process too; the live workers' are still running
        assert held["victim_local_left"] == [] and len(held["live_local"]) == 1, held
        assert all(n >= 1 for n in held["live_local"].values()), held
        assert "docker_on_ray.py" in " ".join(psutil.Process(driver.pid).cmdline())
        driver.send_signal(signal.SIGTERM)
        driver.wait(timeout=120)
    finally:
        if driver.poll() is None:
            driver.kill()
        client.close()
    assert driver.returncode != 0
    # RayExecutor.close() on SIGTERM: every worker removed its own containers, ended its sandboxes'
    # processes, removed their folders, and the run's actors went with it
    assert left() == []
    workers = [int(pid) for pid in held["workers"]]
    assert [p.pid for w in workers for p in sandboxed_processes(w)] == []
    assert [d for w in workers for d in Path("/tmp/openenv-ray").glob(f"*/worker-{w}-*/tmp/*")] == []
    deadline = time.monotonic() + 30
    while _namespace_procs(ray_cluster, "ray::EpisodeWorker") and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not _namespace_procs(ray_cluster, "ray::EpisodeWorker")


# Last: it kills the worker node's raylet, which the session's cluster does not get back.
def test_losing_a_node_mid_episode_retries_it_on_the_other_node_and_leaves_nothing(
    ray_cluster: LoopbackRayCluster, vllm_url: str, tiny_model: Path
):
    raylet = ray_cluster.raylet_pid("127.0.0.2")
    done = ray_cluster.run(
        [sys.executable, str(DRIVERS / "lose_a_node.py"), str(tiny_model), vllm_url, str(raylet)], timeout=540
    )
    assert done.returncode == 0, done.stderr[-3000:]
    run = json.loads(done.stdout.strip().splitlines()[-1])
    assert run["killed_during"], "the node was killed while its episode ran"
    assert sorted(run["attempts"]) == [1, 2] and run["lost"] == 1  # one retry, for the one lost episode
    assert not run["masked"] and run["errors"] == [None, None] and run["rewards"] == [1.0, 1.0]
    head = [node for node, ip in run["worker_ips"].items() if ip == "127.0.0.1"]
    assert run["nodes"] == head * 2  # both final attempts ran on the surviving node
    assert len(run["trajectories"]) == 2 and all(run["trajectories"])
    assert run["leftover_processes"] == [] and run["leftover_sandbox_dirs"] == []
