"""`openenv soak` as users run it: a real subprocess, its JSON report and its exit code."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from openenv.harness.catalog import get_spec
from openenv.harness.install import install_status

OPENENV = [sys.executable, "-m", "openenv.cli.main", "soak"]


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--episodes", "0"], "episodes"),
        (["--kinds", "none,meteor_strike"], "kinds"),
    ],
)
def test_bad_soak_settings_are_a_usage_error_naming_the_setting(args: list[str], named: str) -> None:
    result = subprocess.run(
        [*OPENENV, *args, "--vllm-url", "http://127.0.0.1:9"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert named in result.stdout + result.stderr


@pytest.mark.slow
@pytest.mark.vllm
def test_a_small_soak_reports_json_and_exits_zero_when_every_target_is_met(vllm_url: str) -> None:
    status = install_status(get_spec("codex"))
    if not status.ready:
        pytest.skip(f"codex {status.pinned} is not installed; run scripts/install_harnesses.sh codex")
    result = subprocess.run(
        [
            *OPENENV,
            "--episodes",
            "2",
            "--concurrency",
            "2",
            "--kinds",
            "none,client_retry",
            "--vllm-url",
            vllm_url,
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads(result.stdout)
    assert report["episodes"] == report["ok"] == 2
    assert set(report["per_kind"]) == {"none", "client_retry"}
    assert (report["lost_turns"], report["duplicate_turns"], report["leaked_processes"]) == (0, 0, 0)
    assert report["replays"] == report["replays_identical"] == 1
