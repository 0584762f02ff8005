"""The replay cache of a capture session: a retried request gets the reply it already had.

Requests are known by a digest of their raw body. A body marked as a retry whose reply is remembered is
answered with that reply, unrecorded; a body identical to one still being answered waits for that answer
instead of being generated twice, marked or not (google-genai and codex number no retries). The last
`window` replies are kept, with how each streamed reply was cut into text deltas, so a replay streams
the same bytes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from openenv.capture.canonical import Completion
from openenv.capture.gate import mark_retrieved
from openenv.errors import BackendUnavailable

__all__ = ["REPLAY_WINDOW", "ReplayCache"]

REPLAY_WINDOW = 16  # recent replies kept for retries


class ReplayCache:
    """Replies by body digest, and the requests being answered now. Use on the session's loop only.

    Attributes:
        streamed_pieces: body digest -> how its streamed reply was cut into text deltas (written by the
            streaming path after the reply streamed; pruned with the replies).
    """

    def __init__(self, window: int = REPLAY_WINDOW) -> None:
        self.window = window
        self._replies: dict[str, Completion] = {}
        self.streamed_pieces: dict[str, tuple[tuple[str, str], ...]] = {}  # (channel, piece)s
        self._inflight: dict[str, asyncio.Future[Completion]] = {}  # body digest -> reply being made
        self._joined: set[str] = set()  # digests of in-flight requests that a resent copy is waiting on

    def replayed(self, digest: str | None) -> Completion | None:
        """The remembered reply to this body, if any."""
        return None if digest is None else self._replies.get(digest)

    def join(self, digest: str | None) -> asyncio.Future[Completion] | None:
        """The answer being made for this body, if one is (this caller then waits on it too)."""
        inflight = None if digest is None else self._inflight.get(digest)
        if inflight is not None:
            self._joined.add(digest)  # type: ignore[arg-type]  # digest is not None when inflight is not (looked up by it)
        return inflight

    def shared(self, digest: str | None) -> bool:
        """Whether a resent copy of the in-flight request `digest` is waiting on its answer (then the first
        client leaving must not cancel it)."""
        return digest in self._joined

    async def once(self, digest: str, answer: Callable[[], Awaitable[Completion]]) -> Completion:
        """`answer()`, published under `digest` while it runs so a resent copy can wait for it."""
        inflight: asyncio.Future[Completion] = asyncio.get_running_loop().create_future()
        inflight.add_done_callback(mark_retrieved)
        self._inflight[digest] = inflight
        try:
            done = await answer()
        except Exception as exc:
            inflight.set_exception(exc)
            raise
        except BaseException:
            inflight.set_exception(
                BackendUnavailable("the first attempt of this request was cancelled; retry")
            )
            raise
        finally:
            if self._inflight.get(digest) is inflight:
                del self._inflight[digest]
                self._joined.discard(digest)
        inflight.set_result(done)
        return done

    def remember(self, digest: str, done: Completion) -> None:
        """Keep `done` as the reply to `digest`, dropping the oldest past the window."""
        self._replies[digest] = done
        while len(self._replies) > self.window:
            oldest = next(iter(self._replies))
            del self._replies[oldest]
            self.streamed_pieces.pop(oldest, None)
        while len(self.streamed_pieces) > self.window:  # written after the reply streamed: prune here too
            self.streamed_pieces.pop(next(iter(self.streamed_pieces)))
