"""`openenv harness check` refuses what it cannot check before it installs or starts anything (exit 2,
one line naming the bad word); what the checks do is in tests/harness/e2e/test_check.py."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from openenv.cli.main import app

runner = CliRunner()


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["pi@1;rm -rf ~"], "is not a version"),
        (["notepad"], "unknown harness 'notepad'"),
        (["pi", "--sandbox", "cloud"], "--sandbox is local, docker or both"),
        (["pi", "--fixtures", "fix-deep-merge,nope"], "unknown fixture(s) nope"),
    ],
)
def test_a_bad_target_sandbox_or_fixture_is_a_usage_error_and_nothing_is_installed(
    argv, says, tmp_path, monkeypatch
):
    monkeypatch.setenv("OPENENV_HARNESS_CACHE", str(tmp_path / "harnesses"))
    result = runner.invoke(
        app, ["harness", "check", *argv, "--results", str(tmp_path / "results")], env={"COLUMNS": "300"}
    )
    assert result.exit_code == 2, result.output
    assert says in " ".join(result.output.split())
    assert not (tmp_path / "harness-check").exists() and not (tmp_path / "results").exists()
