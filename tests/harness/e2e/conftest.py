"""End-to-end episodes: a real harness CLI, the local sandbox, the capture proxy and the oracle policy."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from openenv.harness.catalog import get_spec
from openenv.harness.environment import HarnessEnvironment
from openenv.harness.install import install_status
from openenv.harness.oracle import LOOK_COMMAND
from openenv.harness.rollout import run_episode
from openenv.harness.summary import EpisodeSummary
from openenv.harness.tasks import builtin_task

# Its solution has backticks and a heredoc: shell tools that filter commands must still run it.
TASK = "fix-deep-merge"


def require_installed(name: str) -> None:
    status = install_status(get_spec(name))
    if not status.ready:
        pytest.skip(f"{name} {status.pinned} is not installed; run scripts/install_harnesses.sh {name}")


@pytest.fixture
def require_harness() -> Callable[[str], None]:
    """Skips the test, naming the install command, when a harness is not installed at its pin."""
    return require_installed


@pytest.fixture
def oracle_episode(capture_server, no_leftover_processes) -> Callable[..., EpisodeSummary]:
    """Run one oracle episode of a harness (look, fix, answer: 3+ turns) and check everything an RL
    trainer relies on: reward 1, one merged sequence, every completion token scored, aux tagged."""

    def run(name: str, *, expect_aux: int = 0) -> EpisodeSummary:
        require_installed(name)
        env = HarnessEnvironment(name, server=capture_server)
        try:
            obs, summary = run_episode(env, builtin_task(TASK), policy="oracle", look_first=True)
            records = env.trajectory()
        finally:
            env.close()
        detail = f"{summary}\n--- harness output ---\n{obs.output_tail}\n{obs.metadata}"
        assert summary.reward == 1.0, detail
        assert summary.status == "exited", detail
        if env.spec.edit_format is not None:  # aider: one reply, the fix as edit blocks and a ```bash look
            assert summary.turns >= 1 and summary.tool_calls == 0, detail
            assert "Applied edit to" in obs.output_tail and f"Running {LOOK_COMMAND}" in obs.output_tail, (
                detail
            )
        elif env.spec.shell_tool.in_text:  # terminus-2: look, fix, complete, confirm; no tool calls
            assert summary.turns >= 4, detail
        else:
            assert summary.tool_calls >= 2 and summary.turns >= 3, detail
        assert summary.merge_ratio == 1.0 and summary.sequences == 1, detail
        assert summary.aux_turns == expect_aux, detail
        main = [r for r in records if not r.aux]
        assert all(
            r.completion and len(r.completion.logprobs) == len(r.completion.token_ids) > 0 for r in main
        )
        assert all(r.source == "complete" for r in main), "every main turn came from the policy"
        [row] = obs.sequences or []
        assert len(row.completion_ids) == len(row.logprobs) == len(row.env_mask)
        assert sum(row.env_mask) == sum(len(r.completion.token_ids) for r in main if r.completion)
        return summary

    return run
