"""`openenv train grpo`: registered on the CLI, with bad settings refused before any training starts."""

from __future__ import annotations

from typer.testing import CliRunner

from openenv.cli.main import app

runner = CliRunner()


def test_train_grpo_is_on_the_cli():
    result = runner.invoke(app, ["train", "grpo", "--help"])
    assert result.exit_code == 0
    assert "--harness" in result.output and "--num-generations" in result.output


def test_an_unknown_backend_is_refused_by_name():
    result = runner.invoke(app, ["train", "grpo", "--backend", "tpu"])
    assert result.exit_code == 2
    assert "tpu" in result.output


def test_a_bad_harness_mix_is_refused_before_training():
    result = runner.invoke(app, ["train", "grpo", "--harness", "pi=-1"])
    assert result.exit_code == 2
    assert "weights must be >= 0" in result.output
