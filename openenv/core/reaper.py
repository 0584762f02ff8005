"""The idle-session reaper both session tables run (the env server's and the capture proxy's).

One loop, so both check as often and survive a failed round alike: a reaper that died on one bad
session would leave every later idle session open for the process's lifetime.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable

__all__ = ["reap_periodically"]

log = logging.getLogger(__name__)


async def reap_periodically(
    idle_timeout_s: float | None, reap: Callable[[], object | Awaitable[object]]
) -> None:
    """Call `reap` a few times per `idle_timeout_s` until cancelled (at once a no-op without a timeout).

    A round that raises is logged and the next one runs anyway.
    """
    if idle_timeout_s is None:
        return
    interval = min(max(idle_timeout_s / 4, 0.05), 30.0)
    while True:
        await asyncio.sleep(interval)
        try:
            result = reap()
            if inspect.isawaitable(result):
                await result
        except Exception:
            log.exception("the session reaper failed this round; it keeps running")
