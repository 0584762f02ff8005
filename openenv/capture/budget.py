"""Per-episode budgets: caps on model turns, sampled tokens and context length.

A runaway harness loop costs GPU hours, and wall-clock time is a poor cap on a fast engine. A session
with a `Budget` counts its model turns (aux requests excluded) and their sampled tokens. When a request
would go past a cap, the proxy does not sample: it answers in the request's own dialect with a
well-formed final reply (plain text, no tool call, `stop`), so the harness ends its run cleanly, and
the session records which cap was hit (`Session.budget_hit`); the episode's status becomes `budget`.
Within the caps, each turn's `max_tokens` is clamped to the sampled-token and context room left.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Budget", "budget_reply_text"]


class Budget(BaseModel):
    """Caps for one episode; None means no cap.

    Args:
        max_turns: model turns answered; the request after the last one gets the final reply.
        max_sampled_tokens: tokens sampled over the episode's model turns.
        max_context_tokens: prompt + completion length of any one turn.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_turns: int | None = Field(default=None, gt=0)
    max_sampled_tokens: int | None = Field(default=None, gt=0)
    max_context_tokens: int | None = Field(default=None, gt=0)

    @property
    def unlimited(self) -> bool:
        return self.max_turns is None and self.max_sampled_tokens is None and self.max_context_tokens is None

    def tightest(self, other: Budget | None) -> Budget:
        """Both budgets at once (a task's and a run's): the smaller of each cap."""
        if other is None:
            return self

        def low(a: int | None, b: int | None) -> int | None:
            return b if a is None else a if b is None else min(a, b)

        return Budget(
            max_turns=low(self.max_turns, other.max_turns),
            max_sampled_tokens=low(self.max_sampled_tokens, other.max_sampled_tokens),
            max_context_tokens=low(self.max_context_tokens, other.max_context_tokens),
        )

    def exceeded(self, turns: int, sampled: int, prompt_len: int) -> str | None:
        """Which cap a next turn would break, as `name=value`, or None; checked before sampling."""
        if self.max_turns is not None and turns >= self.max_turns:
            return f"max_turns={self.max_turns}"
        if self.max_sampled_tokens is not None and sampled >= self.max_sampled_tokens:
            return f"max_sampled_tokens={self.max_sampled_tokens}"
        if self.max_context_tokens is not None and prompt_len >= self.max_context_tokens:
            return f"max_context_tokens={self.max_context_tokens}"
        return None

    def room(self, sampled: int, prompt_len: int) -> int | None:
        """The most tokens the next turn may sample, or None when no cap applies."""
        rooms = [
            cap
            for cap in (
                None if self.max_sampled_tokens is None else self.max_sampled_tokens - sampled,
                None if self.max_context_tokens is None else self.max_context_tokens - prompt_len,
            )
            if cap is not None
        ]
        return max(min(rooms), 1) if rooms else None


def budget_reply_text(reason: str) -> str:
    """The final reply a harness gets when a cap is hit: plain text that reads as the end of the task."""
    return (
        f"I have to stop here: this episode's budget is spent ({reason}). "
        "I am ending the task now without further actions."
    )
