"""The viewer's page model, built from a recorded real pi oracle episode with a trivial decoder."""

from __future__ import annotations

from pathlib import Path

from openenv.export.log import read_episode
from openenv.viewer.model import build_view, logprob_colour

FIXTURE = Path(__file__).parents[1] / "export" / "fixtures" / "pi-oracle.jsonl"


def test_each_turn_shows_only_the_messages_it_added_and_its_reply():
    view = build_view(read_episode(FIXTURE), decode=lambda t: f"<{t}>")
    first, second = view.turns
    assert [m.role for m in first.new_messages] == ["system", "user"]
    assert first.reply is not None and first.reply.tool_calls[0].name == "bash"
    assert [m.role for m in second.new_messages] == ["assistant", "tool"]
    assert second.new_messages[1].tool_result is not None
    assert second.reply is not None and second.reply.text == "I applied the fix and the task is done."


def test_sequence_tokens_carry_logprob_colour_and_env_mask():
    log = read_episode(FIXTURE)
    view = build_view(log, decode=lambda t: f"<{t}>")
    [seq] = view.sequences
    row = log.sequences[0]
    assert [t.text for t in seq.tokens] == [f"<{t}>" for t in row.completion_ids]
    assert [not t.env for t in seq.tokens] == [bool(m) for m in row.env_mask]
    assert seq.model_tokens == sum(row.env_mask) and seq.env_tokens == row.env_mask.count(0) > 0
    assert all(t.colour == "" for t in seq.tokens if t.env)
    assert view.stats.merge_ratio == 1.0 and view.reward == 1.0 and view.reward_breakdown["tests_passed"] == 3.0


def test_logprob_colour_runs_from_green_to_red_and_clamps():
    assert logprob_colour(0.0) == "hsl(120, 70%, 82%)"
    assert logprob_colour(-4.0) == "hsl(60, 70%, 82%)"
    assert logprob_colour(-8.0) == logprob_colour(-30.0) == "hsl(0, 70%, 82%)"
