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
def long_run(vllm_url: str, tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], LongRun]:
    """Runs `openenv run --harness NAME --policy long` once per harness (the CLI, in a subprocess, against
    the session's vLLM) and returns its output and its trajectory."""
    runs: dict[str, LongRun] = {}

    def run(name: str) -> LongRun:
        require_installed(name)
        if name not in runs:
            out = tmp_path_factory.mktemp(f"long-{name}") / "episode.jsonl"
            argv = [sys.executable, "-m", "openenv.cli.main", "run", "--harness", name, "--task", TASK,
                    "--policy", "long", "--backend", "vllm", "--vllm-url", vllm_url, "--model", str(tiny_model),
                    "--timeout", "400", "--out", str(out)]
            done = subprocess.run(argv, capture_output=True, text=True, timeout=600,
                                  env={**os.environ, "COLUMNS": "200"})
            assert done.returncode == 0, f"{done.stdout}\n{done.stderr[-3000:]}"
            runs[name] = LongRun(stdout=done.stdout, log=read_episode(out), path=out)
        return runs[name]

    return run
