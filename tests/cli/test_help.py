"""`--help` texts and next steps that a user can copy as printed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from openenv.extras import install_hint


def _help(*args: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "openenv.cli.main", *args, "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={**os.environ, "COLUMNS": "250"},
    )
    return " ".join(proc.stdout.replace("│", " ").split())


def test_eval_help_keeps_the_ray_extra() -> None:
    """Rich markup ate `[ray]`: the help said `pip install 'openenv'`."""
    assert install_hint("ray") in _help("eval")


def test_harness_help_names_the_cache_root_uses() -> None:
    text = _help("harness")
    assert "/var/cache/openenv/harnesses for root" in text and "~/.cache/openenv/harnesses" in text


@pytest.mark.parametrize("has_pytest", [True, False])
def test_init_next_step_runs_with_this_python(has_pytest: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """`openenv init` said `python -m pytest`, which fails where pytest is not installed."""
    import importlib.util

    from openenv.cli.envs import init_next_step

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: real(name, *a) if has_pytest or name != "pytest" else None,
    )
    step = init_next_step(Path("/tmp/my env"))
    assert step.startswith("cd '/tmp/my env' && ") and f"{sys.executable} -m pytest" in step
    assert (f"{sys.executable} -m pip install pytest" in step) is not has_pytest
    assert step.endswith(f"{sys.executable} -m openenv.cli.main validate .")


def test_init_prints_the_next_step_whole(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "openenv.cli.main", "init", "demo_help_env", "--dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    line = " ".join(proc.stdout.split())
    assert f"-m pytest && {sys.executable} -m openenv.cli.main validate ." in line, proc.stdout
