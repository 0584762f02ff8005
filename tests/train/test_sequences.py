"""The several-sequences policy: train the longest model span, drop and count the rest."""

from __future__ import annotations

from openenv.capture.trajectory import SequenceRow
from openenv.train.sequences import select_sequence


def _row(mask: list[int], tag: str) -> SequenceRow:
    return SequenceRow(prompt_ids=[1], completion_ids=list(range(len(mask))), logprobs=[0.0] * len(mask),
                       env_mask=mask, turn_ids=[tag])


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
