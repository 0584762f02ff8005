"""Episode budgets: the caps, their combination, and the token caps enforced through a real session."""

from __future__ import annotations

import openai
import pytest
from pydantic import ValidationError

from openenv.capture.budget import Budget
from openenv.capture.canonical import SamplingParams
from openenv.capture.server import CaptureServer


def test_each_cap_names_itself_when_the_next_turn_would_break_it():
    budget = Budget(max_turns=3, max_sampled_tokens=100, max_context_tokens=500)
    assert budget.exceeded(2, 99, 499) is None
    assert budget.exceeded(3, 0, 0) == "max_turns=3"
    assert budget.exceeded(0, 100, 0) == "max_sampled_tokens=100"
    assert budget.exceeded(0, 0, 500) == "max_context_tokens=500"


def test_the_room_left_is_the_smaller_of_the_token_and_context_room():
    budget = Budget(max_sampled_tokens=100, max_context_tokens=500)
    assert budget.room(90, 100) == 10 and budget.room(0, 480) == 20
    assert Budget(max_turns=2).room(10**6, 10**6) is None


def test_a_task_budget_and_a_run_budget_combine_to_the_tightest():
    task, run = Budget(max_turns=10, max_context_tokens=4000), Budget(max_turns=4, max_sampled_tokens=900)
    assert task.tightest(run) == Budget(max_turns=4, max_sampled_tokens=900, max_context_tokens=4000)
    assert task.tightest(None) is task and Budget().unlimited


def test_a_cap_must_be_positive():
    with pytest.raises(ValidationError, match="max_turns"):
        Budget(max_turns=0)


def test_sampled_tokens_are_capped_across_turns_then_the_budget_reply_comes(local_proxy: CaptureServer):
    session = local_proxy.open_session(mode="auto", sampling=SamplingParams(max_tokens=8, temperature=1.0))
    session.set_budget(Budget(max_sampled_tokens=5))
    client = openai.OpenAI(base_url=session.base_url + "/v1", api_key=session.token, max_retries=0)
    messages = [{"role": "user", "content": "count"}]
    first = client.chat.completions.create(model="tiny", messages=messages)
    assert first.usage.completion_tokens <= 5, "the turn is clamped to the tokens left"
    messages += [first.choices[0].message.model_dump(exclude_none=True), {"role": "user", "content": "more"}]
    used = first.usage.completion_tokens
    while session.budget_hit is None:
        reply = client.chat.completions.create(model="tiny", messages=messages)
        used += reply.usage.completion_tokens
        messages += [
            reply.choices[0].message.model_dump(exclude_none=True),
            {"role": "user", "content": "more"},
        ]
    assert used == session.stats().sampled_tokens <= 5
    assert session.budget_hit == "max_sampled_tokens=5"
    assert reply.choices[0].finish_reason == "stop" and "budget is spent" in reply.choices[0].message.content
