"""The verifier: after the harness exits, run the task's hidden tests in the sandbox and score them.

The reward is a dict (tests passed, total, solved, ...) reduced to one scalar by an explicit
`RewardRule`, with optional shaping: a bonus for solving the task in fewer tool calls.
"""

from __future__ import annotations

import json
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from openenv.harness.sandbox.base import Sandbox
from openenv.harness.tasks.model import Task

__all__ = ["RewardRule", "Verdict", "verify"]


class RewardRule(BaseModel):
    """How the reward dict becomes a scalar.

    `solved`: 1.0 when every hidden test passes, else 0.0. `fraction`: tests passed / tests total.
    When solved, `tool_call_bonus * max(0, 1 - tool_calls / tool_call_budget)` is added on top.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    base: Literal["solved", "fraction"] = "solved"
    tool_call_bonus: float = Field(default=0.0, ge=0)
    tool_call_budget: int = Field(default=20, gt=0)

    def scalar(self, *, tests_passed: int, tests_total: int, solved: bool, tool_calls: int) -> float:
        if self.base == "solved":
            value = 1.0 if solved else 0.0
        else:
            value = tests_passed / tests_total if tests_total else float(solved)
        if solved and self.tool_call_bonus:
            value += self.tool_call_bonus * max(0.0, 1 - tool_calls / self.tool_call_budget)
        return value


class Verdict(BaseModel):
    """The verifier's result: the reward breakdown, the scalar and the test output."""

    model_config = ConfigDict(extra="forbid")

    reward: float
    tests_passed: int
    tests_total: int
    solved: bool
    tool_calls: int
    exit_code: int | None
    timed_out: bool
    reported: dict[str, float] = Field(default_factory=dict, description="reward.json / reward.txt as written")
    output_tail: str = ""

    def breakdown(self) -> dict[str, float]:
        """The reward dict: every number the verifier knows, plus the scalar under `reward`."""
        return {
            **self.reported,
            "tests_passed": float(self.tests_passed),
            "tests_total": float(self.tests_total),
            "solved": float(self.solved),
            "tool_calls": float(self.tool_calls),
            "reward": self.reward,
        }


def _read_reported(reward_dir_files: dict[str, str]) -> dict[str, float]:
    if "reward.json" in reward_dir_files:
        data = json.loads(reward_dir_files["reward.json"])
        return {k: float(v) for k, v in data.items() if isinstance(v, int | float | bool)}
    if "reward.txt" in reward_dir_files:
        return {"reward": float(reward_dir_files["reward.txt"].strip() or 0)}
    return {}


def _counts(reported: dict[str, float], *, exit_ok: bool) -> tuple[int, int, bool]:
    """(passed, total, solved): from reward.json's test counts, else reward.txt, else the exit code."""
    if "tests_total" in reported:
        total, passed = int(reported["tests_total"]), int(reported.get("tests_passed", 0))
        return passed, total, total > 0 and passed == total
    if "reward" in reported:
        solved = reported["reward"] >= 1.0
        return int(solved), 1, solved
    return int(exit_ok), 1, exit_ok


def verify(
    sandbox: Sandbox, task: Task, *, tool_calls: int = 0, rule: RewardRule | None = None
) -> Verdict:
    """Copy the hidden tests in, run the task's test command in the workspace, and score the result."""
    rule = rule or RewardRule()
    tests_dir, reward_dir = sandbox.private_dir("tests"), sandbox.private_dir("reward")
    solution_dir = sandbox.private_dir("solution")
    sandbox.write_files(task.tests, under=tests_dir)
    env = {
        "TESTS_DIR": str(tests_dir),
        "REWARD_DIR": str(reward_dir),
        "SOLUTION_DIR": str(solution_dir),
        "WORKSPACE": str(sandbox.workspace),
    }
    result = sandbox.run(["sh", "-c", task.test_command], env=env, timeout_s=task.verifier_timeout_s)
    files = {p.name: p.read_text() for p in reward_dir.iterdir() if p.is_file()}
    reported = _read_reported(files)
    passed, total, solved = _counts(reported, exit_ok=result.exit_code == 0 and not result.timed_out)
    return Verdict(
        reward=rule.scalar(tests_passed=passed, tests_total=total, solved=solved, tool_calls=tool_calls),
        tests_passed=passed,
        tests_total=total,
        solved=solved,
        tool_calls=tool_calls,
        exit_code=result.exit_code,
        timed_out=result.timed_out,
        reported=reported,
        output_tail=result.output[-4000:],
    )
