"""`openenv eval` end to end: real harness CLIs on a built-in task, concurrently, oracle and local backend."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from openenv.cli.main import app as cli
from openenv.eval.report import Report
from openenv.export.log import read_episode

pytestmark = pytest.mark.slow
HARNESSES = "pi,mini-swe-agent"  # the two quickest to start
TASK = "fix-temperature-conversion"


def _eval(out, *args: str) -> Report:
    result = CliRunner().invoke(
        cli,
        [
            "eval",
            "--harness",
            HARNESSES,
            "--only",
            TASK,
            "--concurrency",
            "2",
            "--out",
            str(out),
            "--json",
            *args,
        ],
    )
    assert result.exit_code == 0, result.output
    return Report.model_validate(json.loads(result.stdout.strip().splitlines()[-1]))


def test_oracle_solves_the_task_under_both_harnesses_and_the_report_files_agree(tmp_path):
    report = _eval(tmp_path, "--policy", "oracle")
    rows = {r.harness: r for r in report.rows}
    assert list(rows) == ["pi", "mini-swe-agent"]
    for row in rows.values():
        assert (row.episodes, row.solved, row.solve_rate, row.errors) == (1, 1, 1.0, 0)
        assert row.mean_tool_calls >= 1 and row.mean_turns >= 2
    assert Report.model_validate_json((tmp_path / "results.json").read_text()) == report
    assert "| pi | 1 | 1 | 1 | 100% |" in (tmp_path / "results.md").read_text()
    assert (tmp_path / "solve_rate.png").read_bytes()[:4] == b"\x89PNG"
    for episode in report.episodes:
        log = read_episode(episode.trajectory)
        assert log.summary is not None and log.summary.reward == 1.0
        assert set(log.requests) == {t.id for t in log.turns if not t.aux}  # ready for the viewer and SFT


def test_local_backend_random_model_runs_every_episode_to_a_scored_end(tmp_path):
    """The tiny model is random, so rewards are (almost surely) 0; the table must still be complete."""
    report = _eval(
        tmp_path, "--policy", "sample", "--backend", "local", "--max-tokens", "8", "--timeout", "60"
    )
    assert [r.harness for r in report.rows] == ["pi", "mini-swe-agent"]
    for row in report.rows:
        assert (row.episodes, row.errors) == (1, 0)
        assert 0.0 <= row.solve_rate <= 1.0 and row.mean_turns >= 1
    assert all(e.summary.policy == "sample" and e.summary.turns >= 1 for e in report.episodes)


def test_unknown_task_ids_are_refused_before_anything_runs(tmp_path):
    result = CliRunner().invoke(
        cli, ["eval", "--harness", "pi", "--only", "no-such-task", "--out", str(tmp_path)]
    )
    assert result.exit_code != 0
    assert "has no task(s) no-such-task" in result.output
    assert not (tmp_path / "results.md").exists()


def test_an_unknown_harness_is_refused_before_anything_runs(tmp_path):
    """`--harness pi,codx` used to run pi, then put a 0% `codx` row in the table and exit 0."""
    result = CliRunner().invoke(cli, ["eval", "--harness", "pi,codx", "--out", str(tmp_path)])
    assert result.exit_code == 2 and "unknown harness 'codx'" in result.output, result.output
    assert len(result.output.strip().splitlines()) <= 3 and "Traceback" not in result.output
    assert not (tmp_path / "results.md").exists() and not (tmp_path / "episodes").exists()


@pytest.mark.parametrize("flag", ["--look-first", "--look-after"])
def test_a_demonstration_that_looks_sends_ls_and_the_solutions_own_command_in_that_order(tmp_path, flag):
    """`--policy demo --look-first` / `--look-after` (the learning recipe's shaping demonstrations): two calls,
    each the command itself, never a call of the solution script that only the oracle's episodes have staged;
    the listing before the solution, or right after it."""
    from openenv.harness.tasks.fileops import generate

    split = generate(tmp_path / "tasks", 0, train=1, heldout=0, kinds=("append",))
    result = CliRunner().invoke(
        cli,
        [
            "eval",
            "--harness",
            "pi",
            "--tasks",
            str(tmp_path / "tasks" / "train"),
            "--policy",
            "demo",
            flag,
            "--out",
            str(tmp_path / "out"),
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    report = Report.model_validate(json.loads(result.stdout.strip().splitlines()[-1]))
    [row] = report.rows
    assert (row.solved, row.mean_tool_calls) == (1, 2.0)
    log = read_episode(report.episodes[0].trajectory)
    commands = [
        c.parsed_arguments()["command"] for t in log.turns if t.completion for c in t.completion.tool_calls
    ]
    [task] = split["train"]
    solution = (tmp_path / "tasks" / "train" / task / "solution" / "solve.sh").read_text().strip()
    assert commands == (["ls -la", solution] if flag == "--look-first" else [solution, "ls -la"])
    assert ">>" in solution
