"""`bench/oracle_sweep.py`, the one command behind the harness x task oracle grid: its rows survive a stop.

The full grid (19 harnesses x 15 tasks x 2 sandboxes) takes over an hour on 2 cores, so a sweep that
dies late must not start over: every finished episode is in `--out` at once, and a second run skips it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness.e2e.conftest import require_installed

REPO = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def _sweep(out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "bench/oracle_sweep.py",
            "--harness",
            "pi",
            "--tasks",
            "bash",
            "--only",
            "bash-strict-report",
            "--sandbox",
            "local",
            "--out",
            str(out),
            *extra,
        ],
        check=False,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=500,
    )


def test_a_second_run_keeps_the_finished_rows_and_runs_nothing_again(tmp_path: Path) -> None:
    require_installed("pi")
    out = tmp_path / "sweep.json"
    first = _sweep(out)
    assert first.returncode == 0, first.stderr[-3000:]
    [row] = json.loads(out.read_text())
    assert (row["harness"], row["task"], row["sandbox"], row["reward"]) == (
        "pi",
        "bash-strict-report",
        "local",
        1.0,
    )
    assert "pi " in first.stdout and "1/1" in first.stdout  # the printed grid

    # A row of a cell outside this sweep (the same episode in Docker, from an earlier `--sandbox docker`
    # sweep into the same file) is neither run nor dropped, with or without --fresh.
    docker = {**row, "sandbox": "docker"}
    out.write_text(json.dumps([docker, row]))
    again = _sweep(out)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "1 already in" in again.stderr and "0 to run" in again.stderr, again.stderr
    assert json.loads(out.read_text()) == [docker, row]

    out.write_text(json.dumps([docker, {**row, "wall_s": -1.0}]))
    fresh = _sweep(out, "--fresh")  # runs it again: the planted row is replaced
    assert fresh.returncode == 0, fresh.stderr[-3000:]
    kept, rerun = json.loads(out.read_text())
    assert kept == docker and rerun["sandbox"] == "local" and rerun["wall_s"] > 0
