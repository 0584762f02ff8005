"""The Ray executor on a real two-node cluster (127.0.0.1 + 127.0.0.2, loopback-only namespace).

Each test's driver runs inside the namespace; the episodes are real harness CLIs on a real vLLM.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from openenv.testing.ray_cluster import LoopbackRayCluster

pytestmark = [pytest.mark.slow, pytest.mark.vllm]

DRIVERS = Path(__file__).parent / "drivers"
OPENENV = str(Path(sys.executable).with_name("openenv"))
TASKS = "fix-binary-search,implement-slugify"
# Until the sandbox shows the harness a fixed path (/app), its folder name is random and lands in the
# prompt; rows are compared token for token everywhere else.
WORKSPACE = re.compile(r"/\S*?openenv-[A-Za-z0-9_]+/workspace")


def _report(stdout: str) -> dict:
    return json.loads(stdout.strip().splitlines()[-1])


def _rows(report: dict) -> dict[tuple[str, str], list[dict]]:
    rows = {}
    for episode in report["episodes"]:
        lines = Path(episode["trajectory"]).read_text().splitlines()
        key = (episode["summary"]["harness"], episode["summary"]["task"])
        rows[key] = [json.loads(line) for line in lines if json.loads(line)["type"] == "sequence"]
    return rows


def _same_row(a: dict, b: dict, decode) -> None:  # type: ignore[no-untyped-def]
    assert a["completion_ids"] == b["completion_ids"]
    assert [t for t, m in zip(a["completion_ids"], a["env_mask"], strict=True) if m] == \
           [t for t, m in zip(b["completion_ids"], b["env_mask"], strict=True) if m]
    if a["prompt_ids"] == b["prompt_ids"]:
        assert a["logprobs"] == pytest.approx(b["logprobs"], abs=1e-3)
    else:  # another prompt, so other logprobs: compare the text around the sandbox's folder name
        assert WORKSPACE.sub("<ws>", decode(a["prompt_ids"])) == WORKSPACE.sub("<ws>", decode(b["prompt_ids"]))


def test_eval_on_ray_spreads_over_both_nodes_and_gives_the_thread_executors_rows(
        ray_cluster: LoopbackRayCluster, vllm_url: str, renderer, tmp_path: Path):
    common = ["eval", "--harness", "pi,claude-code", "--tasks", "builtin", "--only", TASKS, "--policy", "oracle",
              "--backend", "vllm", "--vllm-url", vllm_url, "--json"]
    on_ray = ray_cluster.run([OPENENV, *common, "--ray", "auto", "--out", str(tmp_path / "ray")], timeout=540)
    assert on_ray.returncode == 0, on_ray.stderr[-3000:]
    import subprocess

    on_threads = subprocess.run([OPENENV, *common, "--concurrency", "2", "--out", str(tmp_path / "threads")],
                                capture_output=True, text=True, timeout=540, check=False)
    assert on_threads.returncode == 0, on_threads.stderr[-3000:]
    ray_report, thread_report = _report(on_ray.stdout), _report(on_threads.stdout)
    nodes = {e["node"] for e in ray_report["episodes"]}
    assert len(nodes) >= 2 and not any(n.startswith("local:") for n in nodes)
    assert [r["solved"] for r in ray_report["rows"]] == [r["solved"] for r in thread_report["rows"]] == [2, 2]
    ray_rows, thread_rows = _rows(ray_report), _rows(thread_report)
    assert sorted(ray_rows) == sorted(thread_rows) and len(ray_rows) == 4
    decode = renderer.tokenizer.decode
    for key, rows in ray_rows.items():
        assert len(rows) == len(thread_rows[key]) >= 1
        for a, b in zip(rows, thread_rows[key], strict=True):
            _same_row(a, b, decode)
    # the logs were fetched home from the workers' folders
    assert all(Path(e["trajectory"]).parent == tmp_path / "ray" / "episodes" for e in ray_report["episodes"])
