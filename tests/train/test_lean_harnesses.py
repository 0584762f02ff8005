"""The lean configurations of `openenv.train.lean`, run for real: each harness CLI, unmodified and given only its
own flags and config files, sends one line of system prompt and its shell tool, and still solves a task when
the oracle demonstrates it. Without these, a training sequence through Codex is ~6,800 tokens and through
Gemini CLI ~10,600 (their default prompts), too long to train on a CPU."""

from __future__ import annotations

from pathlib import Path

import pytest

from openenv.harness.environment import HarnessEnvironment
from openenv.harness.rollout import run_episode
from openenv.harness.tasks import builtin_task
from openenv.resources import ENVS_PATH_VAR
from openenv.train.lean import LEAN, lean_envs, lean_prompt
from tests.harness.e2e.conftest import require_installed

# Each harness's tools once lean: its shell tool, plus what no flag of its own removes.
TOOLS = {
    "pi": ["bash"],
    "claude-code": ["Bash"],
    "gemini-cli": ["run_shell_command"],
    "codex": ["exec_command", "request_user_input", "view_image", "write_stdin"],
}
SHELL = {"pi": "bash", "claude-code": "Bash", "gemini-cli": "run_shell_command", "codex": "exec_command"}


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", sorted(TOOLS))
def test_a_lean_harness_sends_one_line_of_prompt_and_its_shell_tool_and_still_solves(
    name: str, capture_server: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_installed(name)
    monkeypatch.setenv(ENVS_PATH_VAR, str(lean_envs(tmp_path)))
    env = HarnessEnvironment(name, server=capture_server)
    try:
        assert "Lean:" in env.spec.description  # the lean spec, not the shipped one
        _, summary = run_episode(env, builtin_task("fix-temperature-conversion"), policy="oracle")
        record = env.capture_record()
    finally:
        env.close()
    assert summary.reward == 1.0, summary
    assert record is not None
    first = record[0].sequences[0]
    assert sorted(t.name for t in first.tools) == TOOLS[name]
    system = " ".join(m.text() for m in first.messages if m.role == "system")
    assert lean_prompt(SHELL[name]) in system
    # What else the system prompt keeps is the harness's own short preamble (Claude Code's SDK line, pi's
    # date and working directory), not its default instructions.
    assert len(system) < 200, system


def test_every_lean_harness_is_written_and_the_shipped_specs_are_untouched(tmp_path: Path) -> None:
    from openenv.resources import shipped_envs_dir

    before = {h: (shipped_envs_dir() / h / "spec.yaml").read_text() for h in LEAN}
    envs = lean_envs(tmp_path)
    assert sorted(p.name for p in envs.iterdir()) == sorted(LEAN)
    assert {h: (shipped_envs_dir() / h / "spec.yaml").read_text() for h in LEAN} == before
