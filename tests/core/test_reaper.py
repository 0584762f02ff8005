"""The idle reaper both session tables run keeps going after a failed round."""

from __future__ import annotations

import asyncio

from openenv.core.reaper import reap_periodically


async def _rounds(reap: object, idle_timeout_s: float | None, wanted: int) -> None:
    task = asyncio.create_task(reap_periodically(idle_timeout_s, reap))  # type: ignore[arg-type]
    try:
        while len(calls) < wanted and not task.done():
            await asyncio.sleep(0.01)
    finally:
        task.cancel()


calls: list[str] = []


def test_a_round_that_raises_is_followed_by_more_rounds_sync_and_async() -> None:
    def sync_reap() -> int:
        calls.append("sync")
        if len(calls) == 1:
            raise RuntimeError("one bad session")
        return 0

    async def async_reap() -> list[str]:
        calls.append("async")
        if len(calls) == 4:
            raise RuntimeError("one bad session")
        return []

    calls.clear()
    asyncio.run(_rounds(sync_reap, 0.2, 3))
    assert calls == ["sync"] * 3
    asyncio.run(_rounds(async_reap, 0.2, 6))
    assert calls == ["sync"] * 3 + ["async"] * 3


def test_without_a_timeout_it_returns_at_once() -> None:
    assert asyncio.run(reap_periodically(None, lambda: 1 / 0)) is None
