"""Verifier: rewards are read as Harbor reads them; no reward file is no reward, never the exit code."""

from __future__ import annotations

import os

import pytest

from openenv.harness.rewards import (
    MAX_REWARD_BYTES,
    NoReward,
    parse_reward_json,
    parse_reward_text,
    read_rewards,
)
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
        ('echo 0 > "$REWARD_DIR/reward.txt"; exit 0', 0, 1, False),
        ('echo 1 > "$REWARD_DIR/reward.txt"; exit 1', 1, 1, True),  # the exit code is not a verdict
    ],
)
def test_reward_sources(command, passed, total, solved):
    with LocalSandbox() as box:
        verdict = verify(box, _task(command))
    assert verdict.status == "scored" and verdict.reason == ""
    assert (verdict.tests_passed, verdict.tests_total, verdict.solved) == (passed, total, solved)
    assert verdict.reward == float(solved)


@pytest.mark.parametrize(
    ("command", "status", "reason"),
    [
        ("exit 0", "reward_missing", "no reward file"),
        ("exit 1", "reward_missing", "no reward file"),
        (': > "$REWARD_DIR/reward.txt"', "reward_empty", "reward.txt is empty"),
        ('echo "  " > "$REWARD_DIR/reward.json"', "reward_empty", "reward.json is empty"),
        ('echo passed > "$REWARD_DIR/reward.txt"', "reward_invalid", "does not hold a number"),
        ('echo nan > "$REWARD_DIR/reward.txt"', "reward_invalid", "not a finite number"),
        ('echo inf > "$REWARD_DIR/reward.txt"', "reward_invalid", "not a finite number"),
        ('echo \'{"reward": "1"}\' > "$REWARD_DIR/reward.json"', "reward_invalid", "'reward' is '1'"),
        ('echo \'{"reward": NaN}\' > "$REWARD_DIR/reward.json"', "reward_invalid", "finite numbers"),
        ('echo \'{"reward": {"x": 1}}\' > "$REWARD_DIR/reward.json"', "reward_invalid", "finite numbers"),
        ("echo '[1]' > \"$REWARD_DIR/reward.json\"", "reward_invalid", "object of numbers"),
        ("echo '{}' > \"$REWARD_DIR/reward.json\"", "reward_invalid", "object of numbers"),
        ('echo \'{"a": 1, "b": 0}\' > "$REWARD_DIR/reward.json"', "reward_invalid", "no 'reward' key"),
        # a malformed reward.json is not rescued by a reward.txt beside it (Harbor reads json first)
        (
            'echo x > "$REWARD_DIR/reward.json"; echo 1 > "$REWARD_DIR/reward.txt"',
            "reward_invalid",
            "not JSON",
        ),
        ('ln -s /etc/hostname "$REWARD_DIR/reward.txt"', "reward_invalid", "symbolic link"),
        ('mkfifo "$REWARD_DIR/reward.txt"', "reward_invalid", "not a regular file"),
        (
            f'head -c {MAX_REWARD_BYTES + 1} /dev/zero | tr "\\0" 1 > "$REWARD_DIR/reward.txt"',
            "reward_invalid",
            "limit",
        ),
    ],
)
def test_no_usable_reward_file_is_an_error_with_no_reward(command, status, reason):
    with LocalSandbox() as box:
        verdict = verify(box, _task(command))
    assert verdict.reward is None and verdict.status == status and reason in verdict.reason, verdict
    assert "reward" not in verdict.breakdown() and not verdict.solved


def test_reward_json_wins_over_reward_txt_and_keeps_every_number():
    command = (
        'echo \'{"reward": 0.5, "tests_passed": 14}\' > "$REWARD_DIR/reward.json"; '
        'echo 1 > "$REWARD_DIR/reward.txt"'
    )
    with LocalSandbox() as box:
        verdict = verify(box, _task(command), rule=RewardRule(base="fraction"))
    assert verdict.reward == 0.5 and verdict.reported == {"reward": 0.5, "tests_passed": 14.0}
    assert verdict.breakdown()["tests_passed"] == 14.0 and verdict.breakdown()["reward"] == 0.5


def test_a_single_metric_is_the_reward():
    assert parse_reward_json('{"accuracy": 1}') == {"accuracy": 1.0}
    with LocalSandbox() as box:
        verdict = verify(box, _task('echo \'{"accuracy": 1}\' > "$REWARD_DIR/reward.json"'))
    assert verdict.reward == 1.0 and verdict.solved


def test_reward_txt_is_one_number_as_float_reads_it():
    assert parse_reward_text(" 0.25\n") == {"reward": 0.25}
    assert parse_reward_json('{"reward": true}') == {"reward": 1.0}  # bool is an int, to Harbor too
    with pytest.raises(NoReward, match="does not hold a number"):
        parse_reward_text("0.25\ngarbage\n")
    with pytest.raises(NoReward, match="empty"):
        parse_reward_text("\n \n")


def test_a_reward_folder_swapped_for_a_link_is_refused(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    (real / "reward.txt").write_text("1\n")
    os.symlink(real, tmp_path / "reward")
    with pytest.raises(NoReward) as info:
        read_rewards(tmp_path / "reward")
    assert info.value.status == "reward_invalid"
    with pytest.raises(NoReward) as info:
        read_rewards(tmp_path / "absent")
    assert info.value.status == "reward_missing"


def test_fraction_rule_gives_partial_credit():
    rule = RewardRule(base="fraction")
    assert rule.scalar(tests_passed=3, tests_total=4, solved=False, tool_calls=1) == 0.75
    assert RewardRule().scalar(tests_passed=3, tests_total=4, solved=False, tool_calls=1) == 0.0


def test_tool_call_bonus_only_when_solved():
    rule = RewardRule(tool_call_bonus=0.5, tool_call_budget=10)
    assert rule.scalar(tests_passed=1, tests_total=1, solved=True, tool_calls=2) == pytest.approx(1.4)
    assert rule.scalar(tests_passed=1, tests_total=1, solved=True, tool_calls=30) == 1.0
    assert rule.scalar(tests_passed=0, tests_total=1, solved=False, tool_calls=0) == 0.0


def test_hung_tests_time_out_with_no_reward_even_if_a_reward_was_written():
    task = _task('echo 1 > "$REWARD_DIR/reward.txt"; sleep 30').model_copy(update={"verifier_timeout_s": 0.5})
    with LocalSandbox() as box:
        verdict = verify(box, task)
    assert verdict.timed_out and verdict.reward is None and verdict.status == "verifier_timeout"
    assert "timeout" in verdict.reason


def test_breakdown_is_a_flat_dict_of_numbers():
    with LocalSandbox() as box:
        verdict = verify(box, _task('echo 1 > "$REWARD_DIR/reward.txt"'), tool_calls=3)
    assert verdict.breakdown() == {
        "tests_passed": 1.0,
        "tests_total": 1.0,
        "solved": 1.0,
        "tool_calls": 3.0,
        "reward": 1.0,
    }
