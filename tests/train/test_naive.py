"""The naive-capture control: rows re-rendered from what the harness sent back, against the exact rows."""

from __future__ import annotations

from pathlib import Path

import pytest

from openenv.capture.canonical import Completion, Message, TextPart, ToolCallPart
from openenv.train.naive import echoed_messages, reply_message


def test_a_tool_call_keeps_the_arguments_text_the_harness_sent() -> None:
    echoed = Message(
        role="assistant", parts=(ToolCallPart(id="c1", name="bash", arguments='{"command":"ls"}'),)
    )
    [message] = echoed_messages([echoed])
    assert message["tool_calls"][0]["function"]["arguments"] == '{"command":"ls"}'  # not re-parsed to a dict
    reply = Completion(
        id="t",
        model="m",
        created=0,
        text="done",
        reasoning="why",
        tool_calls=(ToolCallPart(id="c2", name="bash", arguments='{"command": "pwd"}'),),
    )
    assert [type(p).__name__ for p in reply_message(reply).parts] == [
        "ThinkingPart",
        "TextPart",
        "ToolCallPart",
    ]
    assert reply_message(reply).parts[1] == TextPart(text="done")


@pytest.mark.timeout(300)
def test_pis_echo_changes_the_tool_call_tokens_of_the_row_and_nothing_else(tiny_model: Path) -> None:
    """A real pi episode (the oracle's reply, scored by the tiny model): pi sends the call back as
    `{"command":"..."}` where the model's tokens were `{"command": "..."}`. The exact row holds the sampled
    ids; the naive row holds pi's bytes, so the reply's tokens differ there and only there."""
    from openenv.capture.canonical import SamplingParams
    from openenv.capture.engine import EngineSpec
    from openenv.harness.environment import EpisodeSettings, HarnessEnvironment
    from openenv.harness.rollout import run_episode
    from openenv.harness.tasks import builtin_task, builtin_task_ids
    from openenv.train.naive import naive_rows

    env = HarnessEnvironment(
        "pi",
        engine=EngineSpec(backend="local", model=str(tiny_model)),
        settings=EpisodeSettings(sampling=SamplingParams(max_tokens=16, temperature=1.0)),
    )
    try:
        obs, summary = run_episode(env, builtin_task(builtin_task_ids()[0]), policy="oracle")
        record = env.capture_record()
        assert summary.reward == 1.0 and record is not None
        trajectory, renderer = record
        naive = naive_rows(trajectory, renderer)
    finally:
        env.close()
    [exact] = obs.sequences or []
    [row] = naive.rows
    sampled_text = renderer.decode(
        [t for t, m in zip(exact.completion_ids, exact.env_mask, strict=True) if m]
    )
    naive_text = renderer.decode([t for t, m in zip(row.completion_ids, row.env_mask, strict=True) if m])
    assert '{"command": "' in sampled_text and '{"command":"' not in sampled_text
    assert '{"command":"' in naive_text  # pi's own serialization reached the row
    assert row.prompt_ids == exact.prompt_ids  # the first request is the same text either way
    assert naive.sampled == sum(exact.env_mask) and 0 < naive.changed < naive.sampled
    # Outside the call's JSON the two rows agree: the final text reply was rendered from the reply itself.
    assert sampled_text.replace('{"command": "', '{"command":"') == naive_text.replace(
        "<|im_end|>\n", "<|im_end|>"
    )
    assert len(row.logprobs) == len(row.completion_ids) and row.turn_ids == exact.turn_ids
