"""Which training sequence of an episode GRPO trains on, when the episode yields several.

An episode is one sequence when the harness only appends to its history. A history rewrite
(compaction) or a sub-agent starts another. GRPO needs exactly one completion per prompt, so the
policy here is: **train the sequence with the most model-sampled tokens, drop the others, count them**
(the `train/dropped_sequences` metric). The longest model span carries most of the episode's
decisions, and the reward, computed for the whole episode, is credited to it.
"""

from __future__ import annotations

from collections.abc import Sequence

from openenv.capture.trajectory import SequenceRow

__all__ = ["select_sequence"]


def select_sequence(rows: Sequence[SequenceRow]) -> tuple[SequenceRow | None, int]:
    """The row to train on and how many rows were dropped.

    Ties go to the later row (the end of the episode, where the outcome was decided).
    """
    if not rows:
        return None, 0
    best = max(range(len(rows)), key=lambda i: (sum(rows[i].env_mask), i))
    return rows[best], len(rows) - 1
