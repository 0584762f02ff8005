"""The training prompt format: `task` or `harness:task`."""

from __future__ import annotations

import pytest

from openenv.errors import BadRequest
from openenv.train.prompts import TaskPrompt, parse_prompt, task_dataset


def test_a_bare_task_id_leaves_the_harness_to_the_mix():
    assert parse_prompt("fix-binary-search") == TaskPrompt(task="fix-binary-search", harness=None)


def test_a_harness_prefix_pins_the_harness():
    assert parse_prompt(" claude-code:fix-binary-search ") == TaskPrompt(
        task="fix-binary-search", harness="claude-code"
    )


@pytest.mark.parametrize("bad", ["", "   ", ":task", "pi:", None, [{"role": "user", "content": "x"}]])
def test_malformed_prompts_are_refused_with_the_expected_format(bad):
    with pytest.raises(BadRequest, match="harness:task"):
        parse_prompt(bad)


def test_task_dataset_round_trips_through_parse_prompt():
    data = task_dataset(["a", "b"], harness="pi", repeat=2)
    assert data["prompt"] == ["pi:a", "pi:b", "pi:a", "pi:b"]
    assert [parse_prompt(p).harness for p in data["prompt"]] == ["pi"] * 4
