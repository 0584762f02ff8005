"""The backend seam: token ids in, token ids and logprobs out."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Literal, NamedTuple, Protocol, overload, runtime_checkable

from openenv.capture.canonical import SamplingParams

__all__ = ["Backend", "Generation", "TokenIds"]


class Generation(NamedTuple):
    """What a backend sampled: the exact ids (end-of-turn token included when it stopped on it),
    one logprob per id (the backend's `logprob_mode`: `processed` is `log_softmax(logits / temperature)`),
    and why it stopped."""

    token_ids: list[int]
    logprobs: list[float]
    finish_reason: Literal["stop", "length"]


class TokenIds(Sequence[int]):
    """A prompt's ids, gathered into one list only when someone reads them.

    A remote engine is sent the whole prompt every turn, as JSON. The trajectory keeps each
    sequence's ids as JSON text as it grows, so a turn that extends the newest turn hands over that
    text plus the new ids (`json()`), and the 30k ids are neither encoded again nor copied into a
    list. The copy mattered twice over: a list that size, alive across the engine call, is walked
    by every young-generation collection that runs meanwhile (at 60 turns and 16 sessions that was
    ~0.4 CPU-ms a turn, more than the copy itself).

    Each part is a view: a list and the length it had when the view was taken. That is exact because
    a sequence's id arrays and JSON buffer are only ever appended to. The ids are read-only; `tolist()`
    gives a list the caller owns.
    """

    __slots__ = ("_buffer", "_ids", "_len", "_length", "_parts", "_tail")

    def __init__(
        self, *parts: Sequence[int], buffer: bytearray | None = None, length: int = 0, tail: bytes = b""
    ) -> None:
        self._parts = tuple((part, len(part)) for part in parts)
        self._len = sum(n for _, n in self._parts)
        self._ids: list[int] | None = None
        self._buffer, self._length, self._tail = buffer, length, tail

    def json(self) -> bytes | None:
        """`msgspec.json.encode(self.tolist())`, or None when these ids came with no JSON text."""
        if self._buffer is None:
            return None
        sep = b"," if self._length and self._tail else b""
        with memoryview(self._buffer) as whole:  # released at once: a viewed bytearray cannot grow
            return b"".join((b"[", whole[: self._length], sep, self._tail, b"]"))

    def tolist(self) -> list[int]:
        return list(self._joined())

    def _joined(self) -> list[int]:
        if self._ids is None:
            ids: list[int] = []
            for part, n in self._parts:
                ids += part if len(part) == n else part[:n]
            self._ids = ids
        return self._ids

    def __len__(self) -> int:
        return self._len

    @overload
    def __getitem__(self, index: int) -> int: ...
    @overload
    def __getitem__(self, index: slice) -> list[int]: ...
    def __getitem__(self, index: int | slice) -> int | list[int]:
        return self._joined()[index]

    def __iter__(self) -> Iterator[int]:
        return iter(self._joined())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, TokenIds):
            return self._joined() == other._joined()
        if isinstance(other, list):
            return self._joined() == other
        if isinstance(other, tuple):
            return len(other) == self._len and self._joined() == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # equal to lists, which are unhashable

    def __add__(self, other: Iterable[int]) -> list[int]:
        return [*self._joined(), *other]

    def __radd__(self, other: Iterable[int]) -> list[int]:
        return [*other, *self._joined()]

    def __repr__(self) -> str:
        return f"TokenIds({self._joined()!r})"


@runtime_checkable
class Backend(Protocol):
    """Generates and scores by token ids; never sees text. Set `name` in ALL implementations.

    A backend may also offer `async logprob_mode() -> "processed" | "raw" | "unknown"` (what its sampled
    logprobs are, learned once per engine; `capture/logprob_mode.py`) and a `score_logprob_mode` attribute
    (what `score` returns: `processed` when it applies `temperature`, `raw` when it cannot). A backend
    without them records `unknown`, which a training session at a temperature other than 1 refuses.
    It may offer `close_idle()` too: close the engine connections no request is using (the registry
    calls it once every session has closed, so a peak's pooled connections do not outlive it).

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

    async def generate(self, prompt_ids: Sequence[int], params: SamplingParams) -> Generation:
        """Sample a completion for `prompt_ids` (often a read-only `TokenIds`). `params.max_tokens` is
        already clamped."""
        ...

    async def score(
        self, prompt_ids: Sequence[int], completion_ids: Sequence[int], *, temperature: float | None = None
    ) -> list[float]:
        """Logprob of each completion id given the prompt and the ids before it (teacher-forced), under
        `log_softmax(logits / temperature)` where the backend can (`score_logprob_mode`)."""
        ...

    async def aclose(self) -> None:
        """Release connections, threads or weights."""
        ...
