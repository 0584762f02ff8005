"""The backend seam: token ids in, token ids and logprobs out."""

from __future__ import annotations

from typing import Literal, NamedTuple, Protocol, runtime_checkable

from openenv.capture.canonical import SamplingParams

__all__ = ["Backend", "Generation"]


class Generation(NamedTuple):
    """What a backend sampled: the exact ids (end-of-turn token included when it stopped on it),
    one raw logprob per id, and why it stopped."""

    token_ids: list[int]
    logprobs: list[float]
    finish_reason: Literal["stop", "length"]


@runtime_checkable
class Backend(Protocol):
    """Generates and scores by token ids; never sees text. Set `name` in ALL implementations.

    `generate` and `score` raise `BackendUnavailable` when the engine cannot answer; the caller
    turns that into a retryable error in the harness's dialect and a gap on the trajectory.
    """

    name: str

    @property
    def context_window(self) -> int:
        """Most tokens (prompt + completion) one sequence may hold. Valid once `ready` has returned."""
        ...

    async def ready(self) -> None:
        """Learn what a turn needs before it samples (a remote engine's model and window) without
        blocking the event loop; cheap once learned. Raise `BackendUnavailable` if the engine is down."""
        ...

    async def generate(self, prompt_ids: list[int], params: SamplingParams) -> Generation:
        """Sample a completion for `prompt_ids`. `params.max_tokens` is already clamped."""
        ...

    async def score(self, prompt_ids: list[int], completion_ids: list[int]) -> list[float]:
        """Logprob of each completion id given the prompt and the ids before it (teacher-forced)."""
        ...

    async def aclose(self) -> None:
        """Release connections, threads or weights."""
        ...
