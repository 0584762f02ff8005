"""`openenv harness list|install`, `openenv tasks` and `openenv run`, as a user types them."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from openenv.cli.main import app
from openenv.harness.catalog import get_spec, harness_names, unsupported_harnesses
from openenv.harness.install import install_status
from openenv.harness.tasks import builtin_task_ids
from openenv.resources import shipped_envs_dir

runner = CliRunner()


def test_harness_list_shows_every_harness_with_its_pin():
    result = runner.invoke(app, ["harness", "list"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    for name in (
        "claude-code",
        "codex",
        "opencode",
        "gemini-cli",
        "pi",
        "qwen-code",
        "mini-swe-agent",
        "hermes",
        "copilot",
        "cline",
    ):
        assert name in result.output and get_spec(name).install.version in result.output


def test_harness_list_names_the_unsupported_ones_with_their_reason():
    result = runner.invoke(app, ["harness", "list"], env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    unsupported = unsupported_harnesses()
    assert {"crush", "swe-agent"} <= {row.name for row in unsupported}
    for row in unsupported:
        assert row.name in result.output and row.reason.split()[0] in result.output
        assert row.name not in harness_names(), f"{row.name} is both supported and not"


def test_harness_list_json_is_one_object_per_harness_then_per_unsupported_one():
    result = runner.invoke(app, ["harness", "list", "--json"])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in result.output.splitlines()]
    supported = [row for row in rows if "unsupported" not in row]
    assert [row["name"] for row in supported] == harness_names()
    assert len(supported) >= 24, "issue 47: at least 24 harnesses"
    for row in supported:
        spec = get_spec(row["name"])
        status = install_status(spec)
        assert row["version"] == spec.install.version and row["dialect"] == spec.dialect
        assert row["package"] == f"{spec.install.method}:{spec.install.package}"
        assert row["installed"] == status.installed and row["ready"] is status.ready
        assert (
            row["docker"] is None
            if not status.ready
            else row["docker"] is True or isinstance(row["docker"], str)
        )
    tried = {row["name"]: row["unsupported"] for row in rows if "unsupported" in row}
    assert tried == {row.name: row.reason for row in unsupported_harnesses()}


def test_envs_readme_lists_every_harness_and_every_unsupported_one():
    readme = (shipped_envs_dir() / "README.md").read_text()
    for name in [*harness_names(), *(row.name for row in unsupported_harnesses())]:
        assert f"| {name} |" in readme, f"envs/README.md does not list {name}"


def test_harness_install_rejects_an_unknown_name():
    result = runner.invoke(app, ["harness", "install", "notepad"])
    assert result.exit_code == 1
    assert "unknown harness 'notepad'" in result.output


def test_tasks_lists_the_builtin_ids():
    result = runner.invoke(app, ["tasks"])
    assert result.exit_code == 0
    assert [line.split("\t")[0] for line in result.output.splitlines()] == builtin_task_ids()


def test_run_rejects_an_unknown_task():
    result = runner.invoke(app, ["run", "--harness", "pi", "--task", "nope"])
    assert result.exit_code == 1 and "has no task 'nope'" in result.output


@pytest.mark.slow
def test_run_oracle_json_summary_and_trajectory_file(tmp_path):
    if not install_status(get_spec("pi")).ready:
        pytest.skip("pi is not installed; run scripts/install_harnesses.sh pi")
    out = tmp_path / "traj.jsonl"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "openenv.cli.main",
            "run",
            "--harness",
            "pi",
            "--task",
            "fix-deep-merge",
            "--policy",
            "oracle",
            "--json",
            "--out",
            str(out),
        ],
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout)
    assert {"reward", "status", "turns", "tool_calls", "sequences", "merge_ratio"} <= set(summary)
    assert summary["reward"] == 1.0 and summary["merge_ratio"] == 1.0 and summary["status"] == "exited"
    assert summary["tokens_sampled"] > 0 and summary["tokens_trained"] == summary["tokens_sampled"]
    assert "tool calls 1" in proc.stderr, "live progress goes to stderr"
    kinds = [json.loads(line)["type"] for line in out.read_text().splitlines()]
    assert kinds == ["turn"] * summary["turns"] + ["sequence"] * summary["sequences"] + ["summary"]


def test_run_long_names_the_harnesses_with_a_long_episode_recipe():
    result = runner.invoke(app, ["run", "--harness", "pi", "--policy", "long"], env={"COLUMNS": "200"})
    assert result.exit_code == 1, result.output
    assert "--policy long needs a long_episode recipe in pi's spec.yaml" in result.output
    assert "one: claude-code, codex, opencode)" in result.output


def test_run_rejects_an_unknown_sandbox():
    result = runner.invoke(app, ["run", "--harness", "pi", "--sandbox", "vm"], env={"COLUMNS": "200"})
    assert result.exit_code == 2 and "--sandbox is local|docker" in result.output


@pytest.mark.slow
def test_run_with_docker_sandbox_solves_the_task_in_a_container(tmp_path):
    from openenv.harness.sandbox.docker import engine_available

    if (reason := engine_available()) is not None:
        pytest.skip(f"no Docker engine: {reason}; run scripts/install_docker.sh")
    if not install_status(get_spec("pi")).ready:
        pytest.skip("pi is not installed; run scripts/install_harnesses.sh pi")
    subprocess.run(["bash", "scripts/build_base_image.sh"], check=True, capture_output=True)
    before = subprocess.run(
        ["docker", "ps", "-aq"], capture_output=True, text=True, check=True
    ).stdout.split()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "openenv.cli.main",
            "run",
            "--harness",
            "pi",
            "--task",
            "fix-temperature-conversion",
            "--policy",
            "oracle",
            "--sandbox",
            "docker",
            "--json",
            "--out",
            str(tmp_path / "t.jsonl"),
        ],
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout)
    assert (summary["reward"], summary["status"], summary["merge_ratio"]) == (1.0, "exited", 1.0), summary
    after = subprocess.run(["docker", "ps", "-aq"], capture_output=True, text=True, check=True).stdout.split()
    assert set(after) <= set(before), "the episode and grader containers are removed"


def test_run_says_why_an_episode_has_no_reward(monkeypatch):
    """The table shows `none` and the reason; --json carries reward null, the status and the reason."""
    from openenv.cli import harness as cli_harness
    from openenv.testing.results import episode_summary

    summary = episode_summary(
        reward=None,
        reward_status="reward_missing",
        no_reward_reason="the tests wrote no reward file (reward.json or reward.txt)",
        wall_s=0.1,
    )
    monkeypatch.setattr(
        cli_harness,
        "_run_one",
        lambda *args: summary.model_copy(
            update={"notes": ["image python:3.11-slim substituted by openenv/base:latest"]}
        ),
    )
    table = runner.invoke(app, ["run", "--harness", "pi"], env={"COLUMNS": "200"})
    assert table.exit_code == 0, table.output
    assert (
        "none" in table.output
        and "no reward (reward_missing): the tests wrote no reward file" in table.output
    )
    assert "note: image python:3.11-slim substituted by openenv/base:latest" in table.output
    as_json = runner.invoke(app, ["run", "--harness", "pi", "--json"])
    data = json.loads(as_json.stdout)
    assert data["reward"] is None and data["reward_status"] == "reward_missing"
    assert "no reward file" in data["no_reward_reason"] and "substituted" in data["notes"][0]
