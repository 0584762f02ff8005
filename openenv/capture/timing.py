"""Where a model request's time went, for its `Server-Timing` response header.

A harness (or a benchmark) sees one latency per request; what it cannot see is how much of it was the
engine sampling, the controller deciding (a gated session waits for the env's `step`), and the proxy
itself. The route opens a `RequestTimer` in the request's context; the route adds the wait for the
request's body, and the session every engine call and gate wait (a context variable, so child tasks and
`to_thread` copies add to the same box), and the reply carries `Server-Timing: body;dur=...,
engine;dur=..., policy;dur=..., proxy;dur=...` in milliseconds, `proxy` being the rest of the handler's
time. `body` is the time from the route's start until the whole body was read: the handler starts once
the headers are in, so a client still uploading (or a loaded client loop sending late) was counted as the
proxy's own time. It also holds this process's own lag while the body arrives (the loop serving others
between its chunks), so a loaded proxy shows in `body` as well as in what the client waited. Streamed replies send their headers before the engine finishes, so only whole replies
carry it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Literal

__all__ = ["RequestTimer", "waiting"]

Wait = Literal["body", "engine", "policy"]


@dataclass
class RequestTimer:
    """One request's clock: started when the route begins, waits added by `waiting`."""

    start: float = field(default_factory=time.perf_counter)
    body: float = 0.0
    engine: float = 0.0
    policy: float = 0.0

    def header(self) -> str:
        """The `Server-Timing` value, in milliseconds."""
        total = time.perf_counter() - self.start
        proxy = max(0.0, total - self.body - self.engine - self.policy)
        return (
            f"body;dur={self.body * 1e3:.2f}, engine;dur={self.engine * 1e3:.2f}, "
            f"policy;dur={self.policy * 1e3:.2f}, proxy;dur={proxy * 1e3:.2f}"
        )

    @contextmanager
    def opened(self) -> Iterator[RequestTimer]:
        """This timer is the one `waiting` adds to, for the code run inside."""
        reset = _CURRENT.set(self)
        try:
            yield self
        finally:
            _CURRENT.reset(reset)


_CURRENT: ContextVar[RequestTimer | None] = ContextVar("openenv_request_timer", default=None)


@contextmanager
def waiting(kind: Wait) -> Iterator[None]:
    """Count the time inside as a wait on the body, the engine or the policy (nothing when no request is
    timed)."""
    timer = _CURRENT.get()
    start = time.perf_counter()
    try:
        yield
    finally:
        if timer is not None:
            elapsed = time.perf_counter() - start
            setattr(timer, kind, getattr(timer, kind) + elapsed)
