"""Reward functions over the verifier's components, as TRL calls them (keyword lists)."""

from __future__ import annotations

import pytest

from openenv.train.rewards import default_reward_funcs, partial_credit, task_success, tool_call_bonus

COLUMNS = {
    "solved": [1.0, 0.0, 1.0, 1.0],
    "tests_passed": [3.0, 1.0, 3.0, 0.0],
    "tests_total": [3.0, 4.0, 3.0, 0.0],
    "tool_calls": [2.0, 9.0, 30.0, 0.0],
    "masked": [False, False, False, True],
}
PROMPTS, COMPLETIONS = ["t"] * 4, ["c"] * 4


def test_task_success_is_binary_and_none_for_masked_rows():
    assert task_success(PROMPTS, COMPLETIONS, **COLUMNS) == [1.0, 0.0, 1.0, None]


def test_partial_credit_is_the_passed_fraction():
    assert partial_credit(PROMPTS, COMPLETIONS, **COLUMNS) == [1.0, 0.25, 1.0, None]


def test_tool_call_bonus_rewards_solved_rows_only_and_scales():
    bonus = tool_call_bonus(scale=0.5, budget=10)
    assert bonus.__name__ == "tool_call_bonus"  # TRL logs rewards/<name>/mean
    assert bonus(PROMPTS, COMPLETIONS, **COLUMNS) == [pytest.approx(0.4), 0.0, 0.0, None]
    assert tool_call_bonus(scale=2.0, budget=10)(PROMPTS, COMPLETIONS, **COLUMNS)[0] == pytest.approx(1.6)


def test_bad_bonus_settings_are_refused():
    with pytest.raises(ValueError, match="budget > 0"):
        tool_call_bonus(budget=0)


def test_default_set_is_success_partial_and_bonus():
    assert [f.__name__ for f in default_reward_funcs()] == [
        "task_success",
        "partial_credit",
        "tool_call_bonus",
    ]


def test_plain_text_shaping_is_the_letter_and_space_fraction():
    from openenv.train.rewards import plain_text

    scores = plain_text(["p"] * 3, ["ab c", "{}()", ""], masked=[False, False, True])
    assert scores == [1.0, 0.0, None]


def test_malformed_tool_call_penalty_is_bounded_and_none_for_masked_rows():
    from openenv.train.rewards import malformed_tool_call_penalty

    penalty = malformed_tool_call_penalty(scale=0.5, cap=3)
    assert penalty(
        ["p"] * 3, ["c"] * 3, malformed_tool_calls=[0.0, 2.0, 9.0], masked=[False, False, False]
    ) == [0.0, -1.0, -1.5]
    assert penalty(["p"], ["c"], malformed_tool_calls=[4.0], masked=[True]) == [None]
    with pytest.raises(ValueError, match="scale"):
        malformed_tool_call_penalty(scale=-1)
