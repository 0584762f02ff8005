"""The verifier: after the harness exits, run the task's hidden tests in the sandbox and score them.

The tests' reward files are read as Harbor reads them (`rewards.py`): no reward file, an empty one or a
malformed one, and a verifier that ran out of time, give a `Verdict` with **no reward** and a status
and reason saying why; the exit code of the test script is never a verdict. A reward dict (tests
passed, total, ...) is reduced to one scalar by an explicit `RewardRule`, with optional shaping: a
bonus for solving the task in fewer tool calls.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from openenv.errors import OpenEnvError
from openenv.harness.rewards import NoReward, RewardStatus, read_rewards
from openenv.harness.sandbox.base import CommandResult, Sandbox
from openenv.harness.tasks.model import Task

__all__ = ["RewardRule", "Verdict", "score", "verify"]


class RewardRule(BaseModel):
    """How the reward dict becomes a scalar.

    `solved`: 1.0 when every hidden test passes (or the reported `reward` is >= 1), else 0.0.
    `fraction`: tests passed / tests total, or the reported `reward` itself when there are no counts.
    When solved, `tool_call_bonus * max(0, 1 - tool_calls / tool_call_budget)` is added on top.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    base: Literal["solved", "fraction"] = "solved"
    tool_call_bonus: float = Field(default=0.0, ge=0)
    tool_call_budget: int = Field(default=20, gt=0)

    def scalar(
        self,
        *,
        tests_passed: int,
        tests_total: int,
        solved: bool,
        tool_calls: int,
        fraction: float | None = None,
    ) -> float:
        if self.base == "solved":
            value = 1.0 if solved else 0.0
        elif fraction is not None:
            value = fraction
        else:
            value = tests_passed / tests_total if tests_total else float(solved)
        if solved and self.tool_call_bonus:
            value += self.tool_call_bonus * max(0.0, 1 - tool_calls / self.tool_call_budget)
        return value


class Verdict(BaseModel):
    """The verifier's result: the reward breakdown and scalar, or the reason there is no reward."""

    model_config = ConfigDict(extra="forbid")

    reward: float | None = Field(description="None when the verifier produced no reward (see status, reason)")
    status: RewardStatus = "scored"
    reason: str = Field(default="", description="why there is no reward; empty when scored")
    tests_passed: int = 0
    tests_total: int = 0
    solved: bool = False
    tool_calls: int = 0
    exit_code: int | None = None
    timed_out: bool = False
    reported: dict[str, float] = Field(
        default_factory=dict, description="reward.json / reward.txt as written"
    )
    output_tail: str = ""

    def breakdown(self) -> dict[str, float]:
        """The reward dict: every number the verifier knows, plus the scalar under `reward` when scored."""
        numbers = {
            "tests_passed": float(self.tests_passed),
            "tests_total": float(self.tests_total),
            "solved": float(self.solved),
            "tool_calls": float(self.tool_calls),
            **self.reported,  # what the tests wrote wins over what we derived from it
        }
        if self.reward is None:
            numbers.pop("reward", None)
            return numbers
        return {**numbers, "reward": self.reward}


def _counts(reported: dict[str, float]) -> tuple[int, int, bool, float | None]:
    """(passed, total, solved, fraction) from reward.json's test counts, else its `reward` value."""
    if "tests_total" in reported:
        total, passed = int(reported["tests_total"]), int(reported.get("tests_passed", 0))
        return passed, total, total > 0 and passed == total, (passed / total if total else 0.0)
    if "reward" in reported:
        value = reported["reward"]
    elif len(reported) == 1:  # Harbor allows any key; a single metric is the reward
        value = next(iter(reported.values()))
    else:
        raise NoReward(
            "reward_invalid", f"reward.json has no 'reward' key to score by (keys: {sorted(reported)})"
        )
    return int(value >= 1.0), 1, value >= 1.0, value


def score(
    result: CommandResult, reward_dir: Path, *, tool_calls: int = 0, rule: RewardRule | None = None
) -> Verdict:
    """Turn a finished test run and its reward folder into a Verdict (no reward when there is none)."""
    rule = rule or RewardRule()
    base = {
        "tool_calls": tool_calls,
        "exit_code": result.exit_code,
        "timed_out": result.timed_out,
        "output_tail": result.output[-4000:],
    }
    if result.timed_out:
        return Verdict(
            reward=None, status="verifier_timeout", reason="the tests ran past the verifier timeout", **base
        )
    try:
        reported = read_rewards(reward_dir)
        passed, total, solved, fraction = _counts(reported)
    except NoReward as exc:
        return Verdict(reward=None, status=exc.status, reason=exc.reason, **base)
    value = rule.scalar(
        tests_passed=passed, tests_total=total, solved=solved, tool_calls=tool_calls, fraction=fraction
    )
    return Verdict(
        reward=value, tests_passed=passed, tests_total=total, solved=solved, reported=reported, **base
    )


TESTS_PATH, REWARD_PATH, SOLUTION_PATH = "/tests", "/logs/verifier", "/solution"


def verify(sandbox: Sandbox, task: Task, *, tool_calls: int = 0, rule: RewardRule | None = None) -> Verdict:
    """Grade the workspace in Harbor's order, where the agent never had access.

    1. every process the agent's side started is killed (`end_agent`), daemons included;
    2. only now the reward folder `/logs/verifier` is created, empty (nothing planted survives);
    3. only now the hidden tests appear at `/tests`, read-only;
    4. the task's test command runs from the workdir with `[verifier].env`, under its timeout;
    5. the reward files are read from the host side, as Harbor reads them.
    """
    try:
        sandbox.end_agent()
        reward_dir = sandbox.fresh_dir(REWARD_PATH)
        sandbox.fresh_dir(TESTS_PATH)
        sandbox.stage(TESTS_PATH, dict(task.tests), readonly=True)
        home = sandbox.fresh_home()
    except (OSError, OpenEnvError) as exc:  # e.g. something of the agent's still writes there: no grading
        reason = exc.message if isinstance(exc, OpenEnvError) else f"{type(exc).__name__}: {exc}"
        return Verdict(
            reward=None,
            status="verifier_error",
            reason=f"could not prepare grading: {reason}",
            tool_calls=tool_calls,
        )
    # The agent's HOME and TMPDIR are its own: a ~/.gitconfig with core.fsmonitor, a usercustomize.py or a
    # .pth file planted there must not run inside the tests. So the tests get a fresh HOME and TMPDIR, no
    # global or system git config, and no user site-packages; the task's own env comes before, ours wins.
    isolation = {
        "HOME": home,
        "TMPDIR": f"{home}/tmp",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_CONFIG_NOSYSTEM": "1",
        "PYTHONNOUSERSITE": "1",
    }
    env = {
        "TESTS_DIR": TESTS_PATH,
        "REWARD_DIR": REWARD_PATH,
        "SOLUTION_DIR": SOLUTION_PATH,
        "WORKSPACE": sandbox.workdir,
        **task.env,
        **task.verifier_env,
        **isolation,
    }
    result = sandbox.run(
        ["sh", "-c", task.test_command], env=env, timeout_s=task.verifier_timeout_s, cwd=sandbox.workdir
    )
    sandbox.end_agent()  # the tests' own leftovers must not write the reward while it is read
    return score(result, reward_dir, tool_calls=tool_calls, rule=rule)
