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


def _commands(command: object, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], object]]:
    found: list[tuple[tuple[str, ...], object]] = [(path, command)]
    if isinstance(getattr(command, "commands", None), dict):  # a group (typer vendors its own click)
        for name, sub in command.commands.items():  # type: ignore[attr-defined]
            found += _commands(sub, (*path, name))
    return found


def test_reflow_joins_prose_and_keeps_lists_and_verbatim_blocks() -> None:
    from openenv.cli._help import reflow

    text = "First line\nof a sentence.\n\nSteps:\n- one\n- two\n\n\bkept\nas is\n\n    code\n    block"
    assert (
        reflow(text)
        == "First line of a sentence.\n\nSteps:\n- one\n- two\n\n\bkept\nas is\n\n    code\n    block"
    )


def test_every_commands_prose_paragraphs_are_one_line_each() -> None:
    """Typer keeps a docstring's line breaks and wraps again at the terminal's width: sentences broke
    after two words at 80 or 100 columns. Each command's help is reflowed where it is registered."""
    import typer.main

    from openenv.cli._help import reflow
    from openenv.cli.main import app

    commands = _commands(typer.main.get_command(app))
    assert len(commands) > 20
    for path, command in commands:
        text = getattr(command, "help", None) or ""
        assert text == reflow(text), f"openenv {' '.join(path)}: its help has line breaks inside a paragraph"


def test_run_help_reads_as_sentences_at_100_columns() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "openenv.cli.main", "run", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={**os.environ, "COLUMNS": "100"},
    )
    lines = [line.strip() for line in proc.stdout.splitlines()]
    assert not any(line == "side:" or line.endswith(" (our") and len(line) < 60 for line in lines)
    # The docstring's second paragraph, wrapped once by the terminal: no line of it is a stub.
    start = next(i for i, line in enumerate(lines) if line.startswith("Exit code 0"))
    paragraph = lines[start : lines.index("", start)]
    assert len(paragraph) >= 2 and all(len(line) > 60 for line in paragraph[:-1]), paragraph
