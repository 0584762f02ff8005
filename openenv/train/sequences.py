"""Which training sequences of an episode GRPO trains on, and with what weight.

An episode is one sequence when the harness only appends to its history. A history rewrite
(compaction), a sub-agent, a fork or a retried request starts another. Each sequence's model tokens
were sampled by the policy and the episode's reward judges all of them, so by default **every
sequence trains** (`all`): each becomes a row with the episode's advantage, and every sampled token
is in exactly one row (`tokens_trained / tokens_sampled` = 1.00).

TRL's `GRPOTrainer` takes one completion per generation. The rows beyond the first travel in the
`branch_rows` column and `EpisodeGRPOTrainer` (`openenv.train.trainer`) appends them to the batch
after TRL computed the group advantages; a plain `GRPOTrainer` cannot, so there the policy falls back
to `longest` (the sequence with the most sampled tokens trains, the others are dropped and counted in
`rollout/dropped_sequences`).

Row weights (`row_weights`) make an episode count the same whatever its number of rows. TRL's loss
types normalize in two ways, and the weight follows:
- token-normalized losses (`dapo`, the default, `bnpo`, `dr_grpo`, `cispo`, `vespo`): weight 1 per
  row. Every sampled token counts once, exactly as if the episode had been one linear sequence of the
  same tokens; an episode's weights sum to its number of rows.
- sequence-normalized losses (`grpo`, `sapo`, `luspo`): weight 1/k for each of an episode's k rows,
  so its weights sum to 1 and the episode counts once, like a one-row episode.
The weight multiplies the row's advantage; every one of these losses is linear in a positive scale of
the advantage (the clip bounds the ratio, not the advantage), so this is a per-row loss weight.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from openenv.capture.trajectory import SequenceRow

__all__ = [
    "SequencePolicy",
    "TOKEN_NORMALIZED_LOSSES",
    "TrainedRows",
    "row_weights",
    "select_sequence",
    "trained_rows",
]

SequencePolicy = Literal["all", "longest"]
# TRL loss types whose per-token terms are summed over the batch and divided by a token count.
TOKEN_NORMALIZED_LOSSES = frozenset({"dapo", "bnpo", "dr_grpo", "cispo", "vespo"})


def select_sequence(rows: Sequence[SequenceRow]) -> tuple[SequenceRow | None, int]:
    """The row with the most model-sampled tokens and how many other rows there are.

    Ties go to the later row (the end of the episode, where the outcome was decided).
    """
    if not rows:
        return None, 0
    best = max(range(len(rows)), key=lambda i: (sum(rows[i].env_mask), i))
    return rows[best], len(rows) - 1


@dataclass(frozen=True)
class TrainedRows:
    """An episode's rows as GRPO gets them.

    Attributes:
        primary: the row in TRL's one-completion-per-generation slot (the longest), or None.
        branches: the other rows that train too (empty under `longest`).
        dropped: rows that do not train.
        tokens_sampled: model-sampled tokens over all of the episode's rows.
        tokens_trained: model-sampled tokens in the rows that train.
    """

    primary: SequenceRow | None
    branches: tuple[SequenceRow, ...] = ()
    dropped: int = 0
    tokens_sampled: int = 0
    tokens_trained: int = 0

    @property
    def rows(self) -> tuple[SequenceRow, ...]:
        return (self.primary, *self.branches) if self.primary is not None else ()

    @property
    def trained_ratio(self) -> float:
        """tokens_trained / tokens_sampled; 1.0 for an episode that sampled nothing."""
        return self.tokens_trained / self.tokens_sampled if self.tokens_sampled else 1.0


def trained_rows(
    rows: Sequence[SequenceRow], policy: SequencePolicy = "all", *, sampled: int | None = None
) -> TrainedRows:
    """Split an episode's rows into the primary row, the branch rows that also train, and the dropped.

    `sampled` is the episode's count of policy tokens from its turns (`SequenceStats.sampled_tokens`),
    counted independently of the rows, so a token lost or duplicated between rows shows in the ratio;
    default: the rows' own count.
    """
    primary, others = select_sequence(rows)
    in_rows = sum(sum(r.env_mask) for r in rows)
    sampled = in_rows if sampled is None else sampled
    if primary is None:
        return TrainedRows(None, tokens_sampled=sampled)
    if policy == "longest":
        return TrainedRows(primary, (), others, sampled, sum(primary.env_mask))
    branches = tuple(r for r in rows if r is not primary)
    return TrainedRows(primary, branches, 0, sampled, in_rows)


def row_weights(n_rows: int, loss_type: str) -> list[float]:
    """The loss weight of each of an episode's `n_rows` rows under TRL's `loss_type` (see the module doc)."""
    if n_rows <= 0:
        return []
    weight = 1.0 if loss_type in TOKEN_NORMALIZED_LOSSES else 1.0 / n_rows
    return [weight] * n_rows
