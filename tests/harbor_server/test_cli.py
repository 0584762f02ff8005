"""`openenv serve harbor`'s command line: its own options after `harbor`, refused anywhere else, and a bad
start is one line and exit 2 (nothing served)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from openenv.cli.main import app

runner = CliRunner()


def test_harbor_options_belong_to_serve_harbor_only() -> None:
    result = runner.invoke(app, ["serve", "echo", "--tasks", "builtin"])
    assert result.exit_code == 2 and "unknown option(s) --tasks" in result.output


def test_serve_harbor_needs_tasks_and_names_a_bad_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENENV_VLLM_URL", raising=False)  # else `--vllm-url ""` falls back to it
    missing = runner.invoke(app, ["serve", "harbor"])
    assert missing.exit_code == 2 and "--tasks" in missing.output
    bad = runner.invoke(app, ["serve", "harbor", "--tasks", "builtin", "--tasks", "builtin"])
    assert bad.exit_code == 2 and "given twice" in bad.output
    engine = runner.invoke(
        app, ["serve", "harbor", "--tasks", "builtin", "--backend", "vllm", "--vllm-url", ""]
    )
    assert engine.exit_code == 2 and "vllm_url" in engine.output


def test_help_harbor_lists_the_roads_options() -> None:
    result = runner.invoke(app, ["serve", "harbor", "--help-harbor"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    for option in ("--tasks", "--max-rollouts", "--allow-llm-url", "--open-discovery", "--oracle-harness"):
        assert option in result.output
