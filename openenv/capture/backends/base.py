"""The backend seam: token ids in, token ids and logprobs out."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal, NamedTuple, Protocol, runtime_checkable

from openenv.capture.canonical import SamplingParams

__all__ = ["Backend", "Generation", "TokenIds"]


class Generation(NamedTuple):
    """What a backend sampled: the exact ids (end-of-turn token included when it stopped on it),
    one raw logprob per id, and why it stopped."""

    token_ids: list[int]
    logprobs: list[float]
    finish_reason: Literal["stop", "length"]


class TokenIds(list[int]):
    """Prompt ids that may also know their own JSON array text.

    A remote engine is sent the whole prompt every turn. The trajectory keeps each sequence's ids as
    JSON text as it grows, so a turn that extends it hands over that text (plus the new ids) instead
    of having 30k ids encoded again. The text is built only when `json()` is asked for. It stays
    valid because a sequence's JSON buffer is only ever appended to: its first `length` bytes never
    change. Changing the list in place forgets the text. A plain list is still a valid prompt;
    backends that do not send JSON ignore all this.
    """

    __slots__ = ("_buffer", "_length", "_tail")

    def __init__(self, *chunks: Iterable[int], buffer: bytearray | None = None, length: int = 0,
                 tail: bytes = b"") -> None:
        super().__init__(chunks[0] if chunks else ())
        for chunk in chunks[1:]:
            list.extend(self, chunk)
        self._buffer, self._length, self._tail = buffer, length, tail

    def json(self) -> bytes | None:
        """`msgspec.json.encode(list(self))`, or None when these ids came with no JSON text."""
        if self._buffer is None:
            return None
        sep = b"," if self._length and self._tail else b""
        with memoryview(self._buffer) as whole:  # released at once: a viewed bytearray cannot grow
            return b"".join((b"[", whole[: self._length], sep, self._tail, b"]"))


def _forgets_json(name: str) -> Any:
    mutate = getattr(list, name)

    def method(self: TokenIds, *args: Any, **kwargs: Any) -> Any:
        self._buffer = None
        return mutate(self, *args, **kwargs)

    method.__name__ = name
    return method


for _name in ("append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse", "__setitem__",
              "__delitem__", "__iadd__", "__imul__"):
    setattr(TokenIds, _name, _forgets_json(_name))


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
        """Sample a completion for `prompt_ids` (often `TokenIds`). `params.max_tokens` is already clamped."""
        ...

    async def score(self, prompt_ids: list[int], completion_ids: list[int]) -> list[float]:
        """Logprob of each completion id given the prompt and the ids before it (teacher-forced)."""
        ...

    async def aclose(self) -> None:
        """Release connections, threads or weights."""
        ...
