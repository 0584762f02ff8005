"""The run's last lines count the skipped tests and name why, so a green run with skips is not mistaken
for a full one."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SUITE = """
import pytest

def test_runs(): pass
def test_needs_pi(): pytest.skip("pi 0.73.1 is not installed; run scripts/install_harnesses.sh pi")
def test_needs_pi_too(): pytest.skip("pi 0.73.1 is not installed; run scripts/install_harnesses.sh pi")
@pytest.mark.skipif(True, reason="no Docker engine")
def test_needs_docker(): pass
@pytest.mark.xfail(reason="known", run=False)
def test_expected_to_fail(): pass
"""


def _run(tmp_path: Path, body: str) -> list[str]:
    (tmp_path / "test_suite.py").write_text(body)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "openenv.testing.skips",
            "--rootdir",
            str(tmp_path),
            "-c",
            "/dev/null",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    return proc.stdout.strip().splitlines()


def test_skips_are_counted_with_their_commonest_reasons_in_one_line(tmp_path: Path) -> None:
    lines = _run(tmp_path, SUITE)
    (line,) = [ln for ln in lines if ln.startswith("SKIPPED")]
    assert line.startswith("SKIPPED 3 tests (not tested on this machine; scripts/install.sh --all")
    assert "2x pi 0.73.1 is not installed; run scripts/install_harnesses.sh pi; 1x no Docker engine" in line
    assert lines.index(line) >= len(lines) - 2  # the end of the run: only pytest's counts follow


def test_a_run_without_skips_prints_no_summary(tmp_path: Path) -> None:
    assert not [ln for ln in _run(tmp_path, "def test_ok(): pass\n") if ln.startswith("SKIPPED")]
