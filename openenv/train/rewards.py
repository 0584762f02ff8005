"""GRPO reward functions over the verifier's reward components.

The rollout passes each episode's components to TRL as extra columns (`solved`, `tests_passed`,
`tests_total`, `tool_calls`, `masked`, ...), and TRL hands them to every reward function as keyword
lists. Each function returns None for a masked row, which TRL leaves out of the group's baseline.
Combine them with `GRPOConfig(reward_weights=...)`; the seeds' recipe is success + a tool-call bonus.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

__all__ = [
    "RewardFunc",
    "default_reward_funcs",
    "malformed_tool_call_penalty",
    "partial_credit",
    "plain_text",
    "task_success",
    "tool_call_bonus",
]

RewardFunc = Callable[..., list[float | None]]


def task_success(
    prompts: Sequence[Any],
    completions: Sequence[Any],
    *,
    solved: Sequence[float],
    masked: Sequence[bool],
    **_: Any,
) -> list[float | None]:
    """1.0 when every hidden test passed, else 0.0."""
    return [None if m else float(s) for s, m in zip(solved, masked, strict=True)]


def partial_credit(
    prompts: Sequence[Any],
    completions: Sequence[Any],
    *,
    tests_passed: Sequence[float],
    tests_total: Sequence[float],
    masked: Sequence[bool],
    **_: Any,
) -> list[float | None]:
    """Tests passed / tests total (0.0 when the task has no countable tests)."""
    return [
        None if m else (p / t if t else 0.0)
        for p, t, m in zip(tests_passed, tests_total, masked, strict=True)
    ]


def tool_call_bonus(scale: float = 0.5, budget: int = 20) -> RewardFunc:
    """A bonus for solving in fewer tool calls: `scale * max(0, 1 - tool_calls / budget)`, solved rows only.

    Args:
        scale: the bonus for a solve with zero tool calls.
        budget: the tool-call count at which the bonus reaches 0.
    """
    if scale < 0 or budget <= 0:
        raise ValueError(
            f"tool_call_bonus needs scale >= 0 and budget > 0; got scale={scale}, budget={budget}"
        )

    def tool_call_bonus(
        prompts: Sequence[Any],
        completions: Sequence[Any],
        *,
        solved: Sequence[float],
        tool_calls: Sequence[float],
        masked: Sequence[bool],
        **_: Any,
    ) -> list[float | None]:
        return [
            None if m else (scale * max(0.0, 1 - n / budget) if s else 0.0)
            for s, n, m in zip(solved, tool_calls, masked, strict=True)
        ]

    return tool_call_bonus


def malformed_tool_call_penalty(scale: float = 0.1, cap: int = 10) -> RewardFunc:
    """A penalty for tool calls that did not parse: `-scale * min(malformed_tool_calls, cap)` per episode.

    An unparsed call never reaches the harness (it stays in the text), so the episode silently loses a
    step; other frameworks report it mis-trains when left unseen. Opt in by adding it to the reward
    functions (it is not in `default_reward_funcs`).

    Args:
        scale: the penalty per malformed call (or call missing its closing tag).
        cap: malformed calls past this count add nothing (keeps the term bounded).
    """
    if scale < 0 or cap <= 0:
        raise ValueError(f"malformed_tool_call_penalty needs scale >= 0 and cap > 0; got {scale}, {cap}")

    def malformed_tool_call_penalty(
        prompts: Sequence[Any],
        completions: Sequence[Any],
        *,
        malformed_tool_calls: Sequence[float],
        masked: Sequence[bool],
        **_: Any,
    ) -> list[float | None]:
        return [
            None if m else -scale * min(float(n), cap)
            for n, m in zip(malformed_tool_calls, masked, strict=True)
        ]

    return malformed_tool_call_penalty


def default_reward_funcs(*, bonus_scale: float = 0.5, budget: int = 20) -> list[RewardFunc]:
    """Task success, partial test credit and the tool-call bonus, in that order."""
    return [task_success, partial_credit, tool_call_bonus(bonus_scale, budget)]


def plain_text(
    prompts: Sequence[Any], completions: Sequence[Any], *, masked: Sequence[bool], **_: Any
) -> list[float | None]:
    """A warm-up shaping term, not a task reward: the fraction of the reply's characters that are ASCII
    letters or spaces.

    A random-weight model never solves a task, so success gives GRPO no signal; this term varies
    between samples from the first step, so a CPU demo can show the loop learning. It says nothing
    about coding ability. Multi-turn replies include the tool results between turns (TRL decodes the
    whole completion), which the policy does not control; keep it for demos.
    """
    texts = [c if isinstance(c, str) else " ".join(str(m.get("content", "")) for m in c) for c in completions]
    return [
        None if m else (sum(ch.isascii() and (ch.isalpha() or ch == " ") for ch in t) / len(t) if t else 0.0)
        for t, m in zip(texts, masked, strict=True)
    ]
