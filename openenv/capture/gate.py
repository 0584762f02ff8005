"""The gate of a capture session: where a request waits until a controller says who answers it.

An **auto** session lets every request through at once (the backend samples it). A **gated** session
parks each request as a `PendingTurn`; a controller takes it (`CaptureSession.next_pending()`) and
decides: `sample()`, `complete(text=|token_ids=)` or `fail()`. `open()` turns a gated session into an
auto one and lets every parked request through.

The gate's state changes only on the session's event loop. `PendingTurn`'s methods may be awaited from
any loop (`on_loop` hops to the session's); `SyncPendingTurn` is their blocking twin for threads.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from openenv.capture.canonical import CanonicalRequest, Completion
from openenv.capture.trajectory import Turn
from openenv.core.loop_thread import call_on_loop, on_loop
from openenv.errors import BackendUnavailable, BadRequest, EnvError, OpenEnvError

__all__ = [
    "Complete",
    "Decision",
    "Fail",
    "Gate",
    "Mode",
    "PendingTurn",
    "Sample",
    "SyncPendingTurn",
    "abandon",
    "call_on_loop",
    "mark_retrieved",
    "on_loop",
]

Mode = Literal["auto", "gated"]
_TIMEOUT_GRACE_S = 5.0  # a sync caller waits this much past its turn timeout, so the turn's own gap wins


@dataclass(frozen=True, slots=True)
class Sample:
    """The backend samples the reply."""

    timeout: float | None = None  # the controller's turn timeout: past it, the turn is a gap


@dataclass(frozen=True, slots=True)
class Complete:
    """The policy's reply, as text or exact ids; the backend scores it."""

    text: str | None = None
    token_ids: list[int] | None = None
    timeout: float | None = None


@dataclass(frozen=True, slots=True)
class Fail:
    """The harness gets this error instead of a reply."""

    error: OpenEnvError


Decision = Sample | Complete | Fail


class PendingTurn:
    """A model request parked in a gated session until a controller answers it.

    Attributes:
        id: the turn id (also the base of the reply's id).
        request: the canonical request (messages, tools, sampling).
        dialect: the wire format it came in.
        prompt_ids: the exact prompt ids the completion will be conditioned on (read-only; `list()`
            them to own a copy).
        aux: whether the session's aux predicate tagged it (kept out of sequences).
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        turn: Turn,
        request: CanonicalRequest,
        prompt_ids: Sequence[int],
    ) -> None:
        self.id = turn.id
        self.request = request
        self.dialect = turn.dialect
        self.prompt_ids = prompt_ids
        self.aux = turn.aux
        self.loop = loop
        self._decision: asyncio.Future[Decision] = loop.create_future()
        self._done: asyncio.Future[Completion] = loop.create_future()
        # Nobody awaits the reply of a turn failed at close (its controller is gone): mark the error seen,
        # or asyncio logs "Future exception was never retrieved" for every such turn.
        self._done.add_done_callback(mark_retrieved)

    async def sample(self, timeout: float | None = None) -> Completion:
        """Let the backend sample the reply; returns the recorded completion.

        Args:
            timeout: the turn's wall-clock limit (default: the session's); past it the turn is a gap.
        """
        return await on_loop(self.loop, self._resolve(Sample(timeout)))

    async def complete(
        self, *, text: str | None = None, token_ids: list[int] | None = None, timeout: float | None = None
    ) -> Completion:
        """Answer with the policy's reply, as text (tokenized, end-of-turn appended) or exact ids;
        the backend scores it for logprobs and it is parsed into tool calls like a sample.

        Raises:
            BadRequest: neither or both of `text` and `token_ids` were given.
        """
        if (text is None) == (token_ids is None):
            raise BadRequest("complete() takes exactly one of text= or token_ids=")
        return await on_loop(self.loop, self._resolve(Complete(text, token_ids, timeout)))

    async def fail(self, message: str | OpenEnvError = "the controller failed this turn") -> None:
        """Answer the harness with an error (an `EnvError` unless an `OpenEnvError` is given)."""
        error = message if isinstance(message, OpenEnvError) else EnvError(message)
        await on_loop(self.loop, self._resolve(Fail(error), wait=False))

    @property
    def resolved(self) -> bool:
        return self._decision.done()

    def finish(self, done: Completion) -> None:
        """The session recorded the turn: the controller's `sample()`/`complete()` returns `done`.
        Loop thread only."""
        self._done.set_result(done)

    def reject(self, error: BaseException) -> None:
        """The turn failed: the controller's `sample()`/`complete()` raises `error` (no-op once the turn
        was finished or abandoned). Loop thread only."""
        if not self._done.done():
            self._done.set_exception(error)

    def sync(self) -> SyncPendingTurn:
        """The blocking twin, for a controller in a thread."""
        return SyncPendingTurn(self)

    async def _resolve(self, decision: Decision, wait: bool = True) -> Any:
        if self._decision.cancelled():
            raise BackendUnavailable(f"turn {self.id}'s harness disconnected before it was answered")
        if self._decision.done():
            raise BadRequest(f"turn {self.id} was already answered")
        self._decision.set_result(decision)
        return await asyncio.shield(self._done) if wait else None


class SyncPendingTurn:
    """Blocking twin of `PendingTurn` (the same core, run on the session's loop); thread-safe."""

    def __init__(self, turn: PendingTurn) -> None:
        self.turn = turn
        self.id = turn.id
        self.request = turn.request
        self.dialect = turn.dialect
        self.prompt_ids = turn.prompt_ids
        self.aux = turn.aux

    def sample(self, timeout: float | None = None) -> Completion:
        return call_on_loop(self.turn.loop, self.turn.sample(timeout), _outer(timeout))

    def complete(
        self, *, text: str | None = None, token_ids: list[int] | None = None, timeout: float | None = None
    ) -> Completion:
        if (text is None) == (token_ids is None):
            raise BadRequest("complete() takes exactly one of text= or token_ids=")
        return call_on_loop(
            self.turn.loop,
            self.turn.complete(text=text, token_ids=token_ids, timeout=timeout),
            _outer(timeout),
        )

    def fail(self, message: str | OpenEnvError = "the controller failed this turn") -> None:
        call_on_loop(self.turn.loop, self.turn.fail(message), None)

    @property
    def resolved(self) -> bool:
        return self.turn.resolved


class Gate:
    """Parks a gated session's requests as `PendingTurn`s and hands them to its controller, in order.

    Args:
        loop: the session's event loop (every method but `next` runs on it).
        mode: `gated` parks requests; `auto` lets them through.
        gate_aux: park aux requests too (else they are always sampled at once).
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, mode: Mode = "auto", gate_aux: bool = False) -> None:
        self.loop = loop
        self.mode: Mode = mode
        self.gate_aux = gate_aux
        self._queue: asyncio.Queue[PendingTurn] = asyncio.Queue()
        self._parked: dict[str, PendingTurn] = {}  # unanswered, whether or not a controller took them
        self._nudged = False  # a nudge that no `next` has taken yet
        self._waiting: set[asyncio.Future[None]] = set()  # the `next` calls a nudge ends

    def parks(self, aux: bool) -> bool:
        """Whether a request (aux or not) waits for a controller now."""
        return self.mode == "gated" and (self.gate_aux or not aux)

    async def wait(self, pending: PendingTurn) -> Decision:
        """Park `pending` until the controller decides. A cancelled wait (the harness went away) fails
        the controller's `sample()`/`complete()` instead of leaving it hanging."""
        self._parked[pending.id] = pending
        await self._queue.put(pending)
        try:
            return await pending._decision
        except asyncio.CancelledError:
            abandon(pending)
            raise
        finally:
            self._parked.pop(pending.id, None)

    async def next(self, timeout: float | None) -> PendingTurn | None:
        """The next parked request, or None after `timeout` seconds or once nudged."""
        if self._queue.empty() and self._nudged:
            self._nudged = False
            return None
        get = asyncio.ensure_future(self._queue.get())
        nudge = self.loop.create_future()
        self._waiting.add(nudge)
        try:
            await asyncio.wait((get, nudge), timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self._waiting.discard(nudge)
            if not get.done():
                get.cancel()  # a cancelled get takes nothing from the queue
        if nudge.done():
            self._nudged = False
        return get.result() if get.done() and not get.cancelled() else None

    def nudge(self) -> None:
        """End the controller's wait in `next` now, or its next wait at once: something it watches
        besides the queue changed (the harness exited). Loop thread only."""
        self._nudged = True
        for waiting in self._waiting:
            if not waiting.done():
                waiting.set_result(None)

    def open(self) -> None:
        """Switch to auto: sample every parked and future request."""
        self.mode = "auto"
        self._resolve_parked(Sample())

    def close(self, error: OpenEnvError) -> None:
        """Answer every parked request with `error` (the session is closing)."""
        self._resolve_parked(Fail(error))

    def _resolve_parked(self, decision: Decision) -> None:
        while not self._queue.empty():
            self._queue.get_nowait()
        for pending in list(self._parked.values()):
            if not pending.resolved:
                pending._decision.set_result(decision)


def abandon(pending: PendingTurn) -> None:
    """A parked turn whose harness left: its controller's sample()/complete() gets an error, not a hang."""
    if not pending._decision.done():
        pending._decision.cancel()
    pending.reject(BackendUnavailable("the harness disconnected before this turn was answered"))


def mark_retrieved(future: asyncio.Future[Any]) -> None:
    """A done-callback marking a future's exception as seen (nobody may be left to await it)."""
    if not future.cancelled():
        future.exception()


def _outer(timeout: float | None) -> float | None:
    return None if timeout is None else timeout + _TIMEOUT_GRACE_S
