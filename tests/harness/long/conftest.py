"""Long episodes with real harness CLIs: `openenv run --policy long` drives each harness through a
sub-agent and a compaction (see openenv/harness/long_episode.py), sampled turns scored by the session's
vLLM. Each harness runs once per test session; the tests read its trajectory JSONL, as a user would."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from openenv.export.log import EpisodeLog, read_episode
from tests.harness.e2e.conftest import require_installed

TASK = "fix-deep-merge"


@dataclass
class LongRun:
    """One `openenv run --policy long` episode: its console output and its trajectory."""

    stdout: str
    log: EpisodeLog
    path: Path


@pytest.fixture(scope="session")
def long_run(
    vllm_url: str, tiny_model: Path, tmp_path_factory: pytest.TempPathFactory
) -> Callable[[str], LongRun]:
    """Runs `openenv run --harness NAME --policy long` once per harness (the CLI, in a subprocess, against
    the session's vLLM) and returns its output and its trajectory."""
    runs: dict[str, LongRun] = {}

    def run(name: str) -> LongRun:
        require_installed(name)
        if name not in runs:
            out = tmp_path_factory.mktemp(f"long-{name}") / "episode.jsonl"
            argv = [
                sys.executable,
                "-m",
                "openenv.cli.main",
                "run",
                "--harness",
                name,
                "--task",
                TASK,
                "--policy",
                "long",
                "--backend",
                "vllm",
                "--vllm-url",
                vllm_url,
                "--model",
                str(tiny_model),
                "--timeout",
                "400",
                "--out",
                str(out),
            ]
            done = subprocess.run(
                argv, capture_output=True, text=True, timeout=600, env={**os.environ, "COLUMNS": "200"}
            )
            assert done.returncode == 0, f"{done.stdout}\n{done.stderr[-3000:]}"
            runs[name] = LongRun(stdout=done.stdout, log=read_episode(out), path=out)
        return runs[name]

    return run


@pytest.fixture(scope="session")
def claude_gives_up(vllm_url: str, tiny_model: Path) -> Any:
    """A second real Claude Code long episode whose policy gives up after the compaction (reward 0): the
    GRPO group's other member. In-process (`run_episode(policy="long", solve=False)`), same vLLM."""
    from openenv.capture.engine import EngineSpec
    from openenv.harness.environment import HarnessEnvironment
    from openenv.harness.rollout import run_episode
    from openenv.harness.tasks import builtin_task

    require_installed("claude-code")
    env = HarnessEnvironment("claude-code", engine=EngineSpec.of("vllm", model=tiny_model, vllm_url=vllm_url))
    try:
        obs, summary = run_episode(env, builtin_task(TASK), policy="long", solve=False, timeout_s=400)
    finally:
        env.close()
    assert summary.reward == 0.0 and summary.status == "exited", f"{summary}\n{obs.output_tail}"
    return obs, summary
