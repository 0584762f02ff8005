"""The several-sequences policies: `all` trains every sequence with a loss weight, `longest` the one with
the most model tokens (the rest dropped and counted)."""

from __future__ import annotations

import pytest

from openenv.capture.trajectory import SequenceRow
from openenv.train.sequences import row_weights, select_sequence, trained_rows


def _row(mask: list[int], tag: str) -> SequenceRow:
    return SequenceRow(
        prompt_ids=[1],
        completion_ids=list(range(len(mask))),
        logprobs=[0.0] * len(mask),
        env_mask=mask,
        turn_ids=[tag],
    )


def test_the_row_with_most_model_tokens_wins_not_the_longest_row():
    many_env_tokens = _row([1, 0, 0, 0, 0, 0, 1], "compacted-before")
    more_sampled = _row([1, 1, 1, 0, 1], "after-compaction")
    row, dropped = select_sequence([many_env_tokens, more_sampled])
    assert row is more_sampled and dropped == 1


def test_ties_go_to_the_later_sequence():
    first, second, third = _row([1, 1], "a"), _row([1, 1], "b"), _row([1], "c")
    assert select_sequence([first, second, third]) == (second, 2)


def test_no_sequences_means_nothing_to_train():
    assert select_sequence([]) == (None, 0)


def test_all_trains_every_row_and_counts_every_sampled_token():
    before, after, sub = (
        _row([1, 1, 1, 0, 1], "before-compaction"),
        _row([1, 1, 1], "after"),
        _row([1], "sub-agent"),
    )
    rows = trained_rows([before, after, sub], "all", sampled=8)
    assert rows.primary is before and set(map(id, rows.branches)) == {id(after), id(sub)}
    assert (
        rows.dropped == 0
        and (rows.tokens_trained, rows.tokens_sampled) == (8, 8)
        and rows.trained_ratio == 1.0
    )


def test_longest_keeps_one_row_and_its_ratio_says_what_was_lost():
    rows = trained_rows([_row([1, 1, 0, 1], "a"), _row([1, 1], "b")], "longest")
    assert rows.branches == () and rows.dropped == 1
    assert (rows.tokens_trained, rows.tokens_sampled) == (3, 5)


def test_a_token_missing_from_the_rows_shows_in_the_ratio():
    """`sampled` comes from the turns, so a bookkeeping loss between turns and rows is visible."""
    assert trained_rows([_row([1, 1], "a")], "all", sampled=3).trained_ratio == pytest.approx(2 / 3)


@pytest.mark.parametrize(("loss_type", "total"), [("dapo", 3.0), ("bnpo", 3.0), ("grpo", 1.0), ("sapo", 1.0)])
def test_row_weights_make_an_episode_count_once_under_each_loss_normalization(loss_type, total):
    weights = row_weights(3, loss_type)
    assert len(weights) == 3 and len(set(weights)) == 1 and sum(weights) == pytest.approx(total)
