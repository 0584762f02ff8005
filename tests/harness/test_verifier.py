"""Verifier: reward dict, the scalar rule, and tool-call shaping only when solved."""

from __future__ import annotations

import pytest

from openenv.harness.sandbox import LocalSandbox
from openenv.harness.tasks import Task
from openenv.harness.verifier import RewardRule, verify


def _task(test_command: str) -> Task:
    return Task(id="t", instruction="-", tests={"x": ""}, test_command=test_command, solution="true")


@pytest.mark.parametrize(
    ("command", "passed", "total", "solved"),
    [
        ('echo \'{"tests_passed": 3, "tests_total": 4}\' > "$REWARD_DIR/reward.json"', 3, 4, False),
        ('echo \'{"tests_passed": 4, "tests_total": 4}\' > "$REWARD_DIR/reward.json"', 4, 4, True),
        ('echo 1 > "$REWARD_DIR/reward.txt"', 1, 1, True),
        ("exit 0", 1, 1, True),
        ("exit 1", 0, 1, False),
    ],
)
def test_reward_sources(command, passed, total, solved):
    with LocalSandbox() as box:
        verdict = verify(box, _task(command))
    assert (verdict.tests_passed, verdict.tests_total, verdict.solved) == (passed, total, solved)


def test_fraction_rule_gives_partial_credit():
    rule = RewardRule(base="fraction")
    assert rule.scalar(tests_passed=3, tests_total=4, solved=False, tool_calls=1) == 0.75
    assert RewardRule().scalar(tests_passed=3, tests_total=4, solved=False, tool_calls=1) == 0.0


def test_tool_call_bonus_only_when_solved():
    rule = RewardRule(tool_call_bonus=0.5, tool_call_budget=10)
    assert rule.scalar(tests_passed=1, tests_total=1, solved=True, tool_calls=2) == pytest.approx(1.4)
    assert rule.scalar(tests_passed=1, tests_total=1, solved=True, tool_calls=30) == 1.0
    assert rule.scalar(tests_passed=0, tests_total=1, solved=False, tool_calls=0) == 0.0


def test_hung_tests_time_out():
    task = _task("sleep 30").model_copy(update={"verifier_timeout_s": 0.5})
    with LocalSandbox() as box:
        verdict = verify(box, task)
    assert verdict.timed_out and not verdict.solved


def test_breakdown_is_a_flat_dict_of_numbers():
    with LocalSandbox() as box:
        verdict = verify(box, _task("exit 0"), tool_calls=3)
    assert verdict.breakdown() == {
        "tests_passed": 1.0, "tests_total": 1.0, "solved": 1.0, "tool_calls": 3.0, "reward": 1.0
    }
