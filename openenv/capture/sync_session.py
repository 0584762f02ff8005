"""`SyncCaptureSession`: a capture session's blocking twin, for a controller in a thread (an env's step)."""

from __future__ import annotations

from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from openenv.capture.gate import Mode, SyncPendingTurn, call_on_loop

if TYPE_CHECKING:
    from openenv.capture.budget import Budget
    from openenv.capture.journal import Journal
    from openenv.capture.session import CaptureSession
    from openenv.capture.trajectory import SequenceRow, SequenceStats, Trajectory, TurnRecord

__all__ = ["SyncCaptureSession"]

T = TypeVar("T")


class SyncCaptureSession:
    """Blocking twin of `CaptureSession`: the same core, run on the session's loop; thread-safe. Calling
    it on that loop itself is an error (it would deadlock): await the async methods there.

    Attributes:
        session: the async session underneath.
    """

    def __init__(self, session: CaptureSession) -> None:
        self.session = session
        self.token = session.token
        self.base_url = session.base_url

    def next_pending(self, timeout: float | None = None) -> SyncPendingTurn | None:
        pending = self._call(self.session.next_pending(timeout))
        return None if pending is None else pending.sync()

    def nudge(self) -> None:
        """End a `next_pending` wait now, or the next one at once (`CaptureSession.nudge`)."""
        self.session.nudge()

    def run(self) -> None:
        self._call(self.session.run())

    def sequences(self) -> list[SequenceRow]:
        return self._call(self.session.sequences())

    def stats(self) -> SequenceStats:
        return self._call(self.session.stats())

    def turns(self) -> list[TurnRecord]:
        return self._call(self.session.turns())

    def set_budget(self, budget: Budget | None) -> None:
        self.session.set_budget(budget)

    @property
    def trajectory(self) -> Trajectory:
        return self.session.trajectory

    @property
    def journal(self) -> Journal | None:
        return self.session.journal

    @property
    def mode(self) -> Mode:
        return self.session.mode

    @property
    def closed(self) -> bool:
        return self.session.closed

    @property
    def budget_hit(self) -> str | None:
        return self.session.budget_hit

    @property
    def count_tokens_calls(self) -> int:
        return self.session.count_tokens_calls

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        return call_on_loop(self.session.loop, coro, None)
