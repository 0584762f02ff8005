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
    assert (
        view.stats.merge_ratio == 1.0 and view.reward == 1.0 and view.reward_breakdown["tests_passed"] == 3.0
    )


def test_logprob_colour_runs_from_green_to_red_and_clamps():
    assert logprob_colour(0.0) == "hsl(120, 70%, 82%)"
    assert logprob_colour(-4.0) == "hsl(60, 70%, 82%)"
    assert logprob_colour(-8.0) == logprob_colour(-30.0) == "hsl(0, 70%, 82%)"


def test_the_lineage_tree_puts_each_sequence_under_its_parent():
    from openenv.capture.trajectory import SequenceRow

    def row(origin: str, parent: int | None) -> SequenceRow:
        return SequenceRow(
            prompt_ids=[1],
            completion_ids=[2, 3],
            logprobs=[0.0, 0.0],
            env_mask=[1, 0],
            turn_ids=["t"],
            origin=origin,
            parent=parent,
        )  # type: ignore[arg-type]

    log = read_episode(FIXTURE)
    log.sequences = [
        row("new", None),
        row("sub-agent", 0),
        row("compaction", 0),
        row("sub-agent", 2),
        row("sub-agent", 1),
    ]
    view = build_view(log, decode=str)
    assert [(s.index, s.depth, s.origin) for s in view.lineage] == [
        (0, 0, "new"),
        (1, 1, "sub-agent"),
        (4, 2, "sub-agent"),
        (2, 1, "compaction"),
        (3, 2, "sub-agent"),
    ]


def test_the_page_model_counts_tokens_trained_over_sampled():
    view = build_view(read_episode(FIXTURE), decode=str)
    assert (
        view.tokens_sampled > 0 and view.tokens_trained == view.tokens_sampled and view.trained_ratio == 1.0
    )
