"""EnvSessionRegistry: capacity, per-session locking, thread offloading for sync envs, the reaper."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from echo_env import EchoAction, EchoEnvironment, EchoObservation
from openenv.core.wire import ResetRequest
from openenv.errors import CapacityError, EnvError, UnknownSession
from openenv.server.sessions import EnvSessionRegistry, EnvTypes


class SlowEnv(EchoEnvironment):
    """Echo whose sync step blocks its thread, like an env waiting on a subprocess."""

    blocking = True

    def step(self, action: EchoAction) -> EchoObservation:
        time.sleep(0.2)
        obs = super().step(action)
        obs.metadata["thread"] = threading.current_thread().name
        return obs


class NativeAsyncEnv(EchoEnvironment):
    """Echo that overrides `step_async`; the registry must await it on the loop, not in a thread."""

    async def step_async(self, action: EchoAction) -> EchoObservation:
        obs = self.step(action)
        obs.metadata["thread"] = threading.current_thread().name
        return obs


class BrokenFactoryEnv(EchoEnvironment):
    def __init__(self) -> None:
        raise OSError("no sandbox available")


@pytest.fixture
async def make_registry() -> AsyncIterator[object]:
    executor = ThreadPoolExecutor(8, thread_name_prefix="env-test")
    made: list[EnvSessionRegistry] = []

    def _make(factory: type = EchoEnvironment, **kwargs: object) -> EnvSessionRegistry:
        opts = {"max_sessions": 4, "idle_timeout_s": None} | kwargs
        reg = EnvSessionRegistry(
            factory,
            EnvTypes.infer(factory),
            executor=executor,
            **opts,  # type: ignore[arg-type]
        )
        made.append(reg)
        return reg

    yield _make
    for reg in made:
        await reg.close_all()
    executor.shutdown()


async def test_capacity_counts_live_sessions_and_closing_frees_a_slot(make_registry) -> None:  # type: ignore[no-untyped-def]
    reg = make_registry(max_sessions=2)
    a = await reg.open("http")
    await reg.open("ws")
    with pytest.raises(CapacityError) as info:
        await reg.open("http")
    assert info.value.details == {"active": 2, "maximum": 2}
    await reg.close(a.id)
    await reg.open("http")


async def test_unknown_or_closed_session_ids_are_unknown_session(make_registry) -> None:  # type: ignore[no-untyped-def]
    reg = make_registry()
    session = await reg.open("http")
    await reg.close(session.id)
    with pytest.raises(UnknownSession, match="not live"):
        reg.get(session.id)
    with pytest.raises(UnknownSession, match="no session id"):
        reg.get(None)


class MeetingEnv(EchoEnvironment):
    """A sync step that returns only once all four sessions' steps are inside `step` at once (a barrier)
    and the event loop has run meanwhile (`loop_ran`); either can only happen if steps run on threads
    of their own, off the loop. Made per test (`meeting_env`): the barrier and the event are its class's."""

    blocking = True
    arrived: threading.Barrier
    loop_ran: threading.Event

    def step(self, action: EchoAction) -> EchoObservation:
        self.arrived.wait()  # BrokenBarrierError after its timeout: the steps ran one after another
        if not self.loop_ran.wait(30):
            raise TimeoutError("the event loop did not run while the envs' steps blocked")
        obs = super().step(action)
        obs.metadata["thread"] = threading.current_thread().name
        return obs


async def test_sync_envs_block_a_worker_thread_not_the_event_loop(make_registry) -> None:  # type: ignore[no-untyped-def]
    env = type(
        "Meeting", (MeetingEnv,), {"arrived": threading.Barrier(4, timeout=30), "loop_ran": threading.Event()}
    )
    reg = make_registry(env)
    sessions = [await reg.open("ws") for _ in range(4)]
    for s in sessions:
        await s.reset(ResetRequest())

    async def ticker() -> None:  # sets `loop_ran` once the loop has turned over a few times
        for _ in range(5):
            await asyncio.sleep(0.01)
        env.loop_ran.set()

    task = asyncio.create_task(ticker())
    results = await asyncio.gather(*(s.step({"message": "x"}) for s in sessions))
    await task
    assert all(r.metadata["thread"].startswith("env-test") for r in results)


async def test_async_native_envs_are_awaited_on_the_loop(make_registry) -> None:  # type: ignore[no-untyped-def]
    reg = make_registry(NativeAsyncEnv)
    session = await reg.open("ws")
    await session.reset(ResetRequest())
    obs = await session.step({"message": "x"})
    assert obs.metadata["thread"] == threading.current_thread().name


async def test_non_blocking_envs_are_called_inline(make_registry) -> None:  # type: ignore[no-untyped-def]
    class InlineEnv(EchoEnvironment):
        blocking = False

        def step(self, action: EchoAction) -> EchoObservation:
            obs = super().step(action)
            obs.metadata["thread"] = threading.current_thread().name
            return obs

    session = await make_registry(InlineEnv).open("ws")
    await session.reset(ResetRequest())
    assert (await session.step({"message": "x"})).metadata["thread"] == threading.current_thread().name


async def test_only_a_non_blocking_env_without_coroutines_is_inline(make_registry) -> None:  # type: ignore[no-untyped-def]
    """`inline` lets the WebSocket route skip its disconnect watch: it must hold only for envs whose calls
    cannot suspend (a thread-pool call or an env coroutine can run long, and must stay abandonable)."""

    class InlineEnv(EchoEnvironment):
        blocking = False

    inline = {
        env: (await make_registry(env).open("ws")).inline for env in (InlineEnv, SlowEnv, NativeAsyncEnv)
    }
    assert inline == {InlineEnv: True, SlowEnv: False, NativeAsyncEnv: False}


class CountingEnv(SlowEnv):
    """SlowEnv that counts the steps inside `step` at once (`most`); each test's subclass lists its
    instances in `made`."""

    made: list[CountingEnv]

    def __init__(self) -> None:
        super().__init__()
        self.inside = self.most = 0
        self.lock = threading.Lock()
        self.made.append(self)

    def step(self, action: EchoAction) -> EchoObservation:
        with self.lock:
            self.inside += 1
            self.most = max(self.most, self.inside)
        try:
            return super().step(action)  # 0.2 s: two steps let through together would overlap here
        finally:
            with self.lock:
                self.inside -= 1


async def test_steps_on_one_session_never_interleave(make_registry) -> None:  # type: ignore[no-untyped-def]
    env = type("Counting", (CountingEnv,), {"made": []})
    reg = make_registry(env)
    session = await reg.open("http")
    await session.reset(ResetRequest())
    await asyncio.gather(session.step({"message": "a"}), session.step({"message": "b"}))
    assert (await session.state()).step_count == 2
    assert [made.most for made in env.made] == [1]


async def test_a_failing_factory_is_env_error_and_holds_no_slot(make_registry) -> None:  # type: ignore[no-untyped-def]
    reg = make_registry(BrokenFactoryEnv, max_sessions=1)
    with pytest.raises(EnvError, match="OSError: no sandbox available"):
        await reg.open("http")
    assert reg.active == 0


async def test_reaper_closes_only_sessions_idle_past_the_timeout(make_registry) -> None:  # type: ignore[no-untyped-def]
    reg = make_registry(idle_timeout_s=0.1)
    reaped_callbacks: list[str] = []
    idle = await reg.open("ws", on_reap=lambda: _record(reaped_callbacks, "idle"))
    await asyncio.sleep(0.15)
    busy = await reg.open("http")
    assert await reg.reap_idle() == [idle.id]
    assert reaped_callbacks == ["idle"]
    assert reg.get(busy.id) is busy


async def test_reaper_keeps_a_session_with_an_attached_websocket(make_registry) -> None:  # type: ignore[no-untyped-def]
    """A session made by `openenv/session/create` and driven by `/ws?session_id=` has a client still
    connected; like the reference, the reaper leaves it for `openenv/session/close`."""
    reg = make_registry(idle_timeout_s=0.1)
    attached = await reg.open("mcp")
    attached.attached = True
    loose = await reg.open("mcp")
    attached.last_used = loose.last_used = time.monotonic() - 1.0
    assert await reg.reap_idle() == [loose.id]
    assert reg.get(attached.id) is attached


async def _record(sink: list[str], value: str) -> None:
    sink.append(value)


def test_max_sessions_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        EnvSessionRegistry(
            EchoEnvironment,
            EnvTypes.infer(EchoEnvironment),
            max_sessions=0,
            idle_timeout_s=None,
            executor=ThreadPoolExecutor(1),
        )


def test_a_plain_factory_needs_explicit_models() -> None:
    with pytest.raises(TypeError, match="action_type= and observation_type="):
        EnvTypes.infer(lambda: EchoEnvironment())


async def test_the_reaper_keeps_reaping_when_closing_one_socket_fails(make_registry) -> None:
    """A socket that died under the server made `on_reap` raise, which ended the reaper task for good:
    from then on no session ever expired (HTTP sessions least of all)."""
    reg = make_registry(idle_timeout_s=0.05)

    async def broken_socket() -> None:
        raise RuntimeError("Cannot call send once a close message has been sent")

    await reg.open("ws", on_reap=broken_socket)
    http_session = await reg.open("http")
    reaper = asyncio.create_task(reg.run_reaper())
    try:
        await asyncio.sleep(0.5)
        assert not reaper.done()
        assert reg.active == 0
        with pytest.raises(UnknownSession):
            reg.get(http_session.id)
    finally:
        reaper.cancel()


async def test_at_capacity_the_longest_idle_http_session_gives_way(make_registry) -> None:
    reg = make_registry(max_sessions=2, http_evict_after_s=0.05)
    ws_session = await reg.open("ws")
    idle_http = await reg.open("http")
    with pytest.raises(CapacityError):  # not idle long enough yet
        reg.http_evict_after_s = 60
        await reg.open("http")
    reg.http_evict_after_s = 0.05
    await asyncio.sleep(0.1)
    newcomer = await reg.open("http")
    assert (
        reg.get(ws_session.id) is ws_session and reg.get(newcomer.id) is newcomer
    )  # a WebSocket never gives way
    with pytest.raises(UnknownSession):
        reg.get(idle_http.id)


async def test_an_mcp_session_gives_way_like_http_unless_a_websocket_is_attached(make_registry) -> None:
    """`openenv/session/create` sessions have no connection that ends with their client either."""
    reg = make_registry(max_sessions=2, http_evict_after_s=0.05)
    attached = await reg.open("mcp")
    attached.attached = True
    loose = await reg.open("mcp")
    attached.last_used = loose.last_used = time.monotonic() - 1.0
    newcomer = await reg.open("ws")
    assert reg.get(attached.id) is attached and reg.get(newcomer.id) is newcomer
    with pytest.raises(UnknownSession):
        reg.get(loose.id)


async def test_a_held_slot_counts_against_capacity(make_registry) -> None:
    reg = make_registry(max_sessions=1)
    async with reg.hold("mcp"):
        assert reg.active == 1
        with pytest.raises(CapacityError):
            await reg.open("ws")
    assert reg.active == 0
    session = await reg.open("ws")
    with pytest.raises(CapacityError):
        async with reg.hold("mcp"):
            pass
    await reg.close(session.id)
