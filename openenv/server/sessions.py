"""Sessions: one env instance per client, a capacity limit, a per-session lock and an idle reaper.

Sync envs run in the registry's thread pool so the event loop never blocks; envs that override
`reset_async`/`step_async` are awaited directly, and envs marked `blocking = False` are called inline. Any exception an env raises that is not already an
`OpenEnvError` becomes an `EnvError`, so a buggy env answers an error instead of crashing the server.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from pydantic import ValidationError

from openenv.core.environment import Environment, EnvMetadata
from openenv.core.reaper import reap_periodically
from openenv.core.types import Action, Observation, State
from openenv.core.validation import field_errors, validation_message
from openenv.core.wire import ResetRequest
from openenv.errors import BadRequest, CapacityError, EnvError, InvalidAction, OpenEnvError, UnknownSession

__all__ = ["EnvFactory", "EnvSession", "EnvSessionRegistry", "EnvTypes"]

log = logging.getLogger(__name__)

EnvFactory = Callable[[], Environment[Any, Any, Any]]
Transport = Literal["http", "ws", "mcp"]
T = TypeVar("T")


@dataclass(frozen=True)
class EnvTypes:
    """The models a served env speaks, and what `/metadata` says about it."""

    action: type[Action]
    observation: type[Observation]
    state: type[State]
    metadata: EnvMetadata

    @classmethod
    def infer(
        cls,
        env_factory: EnvFactory,
        *,
        action_type: type[Action] | None = None,
        observation_type: type[Observation] | None = None,
        state_type: type[State] | None = None,
        metadata: EnvMetadata | None = None,
    ) -> EnvTypes:
        """Take the models from the arguments, else from the env class when the factory is one."""
        env_cls = (
            env_factory if isinstance(env_factory, type) and issubclass(env_factory, Environment) else None
        )
        if env_cls is None and (action_type is None or observation_type is None):
            raise TypeError(
                "create_app() got a factory that is not an Environment subclass; "
                "pass action_type= and observation_type= so the server can validate and document the wire"
            )
        metadata = metadata or (
            env_cls.metadata() if env_cls else EnvMetadata(name=getattr(env_factory, "__name__", "env"))
        )
        return cls(
            action=action_type or env_cls.action_type,  # type: ignore[union-attr]  # env_cls is set whenever action_type is not: checked above
            observation=observation_type or env_cls.observation_type,  # type: ignore[union-attr]  # env_cls is set whenever observation_type is not: checked above
            state=state_type or (env_cls.state_type if env_cls else State),
            metadata=metadata,
        )


@dataclass(eq=False)
class EnvSession:
    """One client's env instance. Every operation holds the session's lock, so calls never interleave."""

    id: str
    env: Environment[Any, Any, Any]
    types: EnvTypes
    transport: Transport
    executor: ThreadPoolExecutor
    on_reap: Callable[[], Awaitable[None]] | None = None
    allow_inline_tasks: bool = False
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    last_used: float = field(default_factory=time.monotonic)
    started: bool = False
    # A session opened over MCP (`openenv/session/create`) that a WebSocket attached to (`/ws?session_id=`):
    # while attached, `openenv/session/close` only marks it, and the WebSocket closes it when it hangs up.
    attached: bool = False
    close_on_detach: bool = False
    # The env's calls run on the event loop to the end without suspending (`blocking = False`, no
    # coroutine of its own): a WebSocket call on it cannot be abandoned half-way, so needs no watch.
    inline: bool = field(init=False)

    def __post_init__(self) -> None:
        env = self.env
        self.inline = not (env.blocking or _overrides(env, "reset_async") or _overrides(env, "step_async"))

    async def reset(self, req: ResetRequest) -> Observation:
        """Reset on behalf of a network client: the env first refuses options such a client may not set."""
        options = req.env_options()
        self.env.check_wire_reset(options, allow_inline_tasks=self.allow_inline_tasks)
        async with self.lock:
            obs: Observation = await self._call(
                "reset_async", self.env.reset, req.seed, req.episode_id, **options
            )
            self.started = True
            return obs

    async def step(self, payload: dict[str, Any]) -> Observation:
        try:
            action = self.types.action.model_validate(payload)
        except ValidationError as exc:
            raise InvalidAction(validation_message(exc, "action"), errors=field_errors(exc)) from None
        async with self.lock:
            if not self.started and self.env.requires_reset:
                raise BadRequest("this session has not been reset yet; send reset before step")
            return await self._call("step_async", self.env.step, action)

    async def state(self) -> State:
        async with self.lock:
            return await self._call(None, lambda: self.env.state)

    async def close(self) -> None:
        """Close the env. After a client vanished mid-call the call was cancelled, but a sync env's
        call may still be running in its worker thread: `env.close()` then runs beside it, and should
        make it return (the harness env kills the harness, which ends a waiting step)."""
        async with self.lock:
            await self._call(None, self.env.close)

    async def _call(self, async_name: str | None, sync_fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        self.last_used = time.monotonic()
        try:
            if async_name is not None and _overrides(self.env, async_name):
                return await getattr(self.env, async_name)(*args, **kwargs)
            if not self.env.blocking:
                return sync_fn(*args, **kwargs)
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(self.executor, functools.partial(sync_fn, *args, **kwargs))
        except OpenEnvError:
            raise
        except Exception as exc:
            log.exception("env %s failed in session %s", type(self.env).__name__, self.id)
            raise EnvError(f"the environment raised {type(exc).__name__}: {exc}", session_id=self.id) from exc
        finally:
            self.last_used = time.monotonic()


class EnvSessionRegistry:
    """Live sessions by id, bounded by `max_sessions`, with idle ones closed by `run_reaper`, and idle
    HTTP sessions given up to new clients when the server is full (`http_evict_after_s`)."""

    def __init__(
        self,
        env_factory: EnvFactory,
        types: EnvTypes,
        *,
        max_sessions: int,
        idle_timeout_s: float | None,
        executor: ThreadPoolExecutor,
        allow_inline_tasks: bool = False,
        http_evict_after_s: float | None = 30.0,
    ) -> None:
        if max_sessions < 1:
            raise ValueError(f"max_sessions must be at least 1, got {max_sessions}")
        self.env_factory = env_factory
        self.types = types
        self.max_sessions = max_sessions
        self.idle_timeout_s = idle_timeout_s
        self.executor = executor
        self.allow_inline_tasks = allow_inline_tasks
        self.http_evict_after_s = http_evict_after_s
        self._sessions: dict[str, EnvSession] = {}
        self._opening = 0  # slots taken by sessions being built and by MCP calls in flight

    @property
    def active(self) -> int:
        """Slots in use: live sessions, sessions being opened and MCP tool calls in flight."""
        return len(self._sessions) + self._opening

    @contextlib.asynccontextmanager
    async def hold(self, what: str) -> AsyncIterator[None]:
        """Take one slot for the duration of a call that is not a session (an MCP `run_episode`).

        Raises:
            CapacityError: every slot is taken.
        """
        if self.active >= self.max_sessions:
            raise CapacityError(self.active, self.max_sessions)
        self._opening += 1
        try:
            yield
        finally:
            self._opening -= 1

    async def open(
        self, transport: Transport, on_reap: Callable[[], Awaitable[None]] | None = None
    ) -> EnvSession:
        """Build a fresh env for a new session.

        Raises:
            CapacityError: `max_sessions` sessions are live (or being opened) already.
            EnvError: the env factory failed.
        """
        if self.active >= self.max_sessions:
            await self._evict_idle_http()
        if self.active >= self.max_sessions:
            raise CapacityError(self.active, self.max_sessions)
        self._opening += 1
        try:
            env = await asyncio.get_running_loop().run_in_executor(self.executor, self.env_factory)
        except Exception as exc:
            log.exception("env factory failed")
            raise EnvError(f"could not create the environment: {type(exc).__name__}: {exc}") from exc
        finally:
            self._opening -= 1
        sid = secrets.token_urlsafe(16)
        session = EnvSession(sid, env, self.types, transport, self.executor, on_reap, self.allow_inline_tasks)
        self._sessions[sid] = session
        return session

    async def _evict_idle_http(self) -> None:
        """At capacity, close the HTTP session idle the longest if it has been idle `http_evict_after_s`.

        An HTTP session has no connection that ends with its client: one that crashed (or 64 `POST
        /reset` sent to fill the server) holds its slot until the reaper's timeout. Under pressure
        such a slot goes to a new client; a WebSocket session, whose client is still connected, is never
        evicted. Neither is a session made by MCP's `openenv/session/create` while a WebSocket is attached
        to it; without one it is like an HTTP session and gives way too.
        """
        if self.http_evict_after_s is None:
            return
        cutoff = time.monotonic() - self.http_evict_after_s
        idle = [
            s
            for s in self._sessions.values()
            if s.transport in ("http", "mcp")
            and not s.attached
            and s.last_used < cutoff
            and not s.lock.locked()
        ]
        if idle:
            oldest = min(idle, key=lambda s: s.last_used)
            log.info(
                "at capacity: closing HTTP session %s, idle %.0f s",
                oldest.id,
                time.monotonic() - oldest.last_used,
            )
            await self.close(oldest.id)

    def get(self, session_id: str | None) -> EnvSession:
        """The live session with this id.

        Raises:
            UnknownSession: no id was given, or it was never issued, closed or reaped.
        """
        if not session_id:
            raise UnknownSession(
                "no session id: send the id that POST /reset returned in the X-Session-Id header"
            )
        try:
            return self._sessions[session_id]
        except KeyError:
            raise UnknownSession(
                f"session {session_id!r} is not live (never issued, closed or reaped); POST /reset for a new one",
                session_id=session_id,
            ) from None

    async def close(self, session_id: str) -> None:
        """Close a session and its env; closing an unknown or closed session is a no-op."""
        session = self._sessions.pop(session_id, None)
        if session is None:
            return
        try:
            await session.close()
        except OpenEnvError:
            pass  # already logged by the session; the slot is free either way

    async def reap_idle(self) -> list[str]:
        """Close every session idle for longer than `idle_timeout_s` and not mid-call; return their ids.

        A session with a WebSocket attached (`/ws?session_id=`) is kept, as the reference keeps it: its
        client is still connected, and it closes the session with `openenv/session/close`."""
        if self.idle_timeout_s is None:
            return []
        deadline = time.monotonic() - self.idle_timeout_s
        idle = [
            s
            for s in self._sessions.values()
            if s.last_used < deadline and not s.lock.locked() and not s.attached
        ]
        for session in idle:
            log.info("reaping session %s after %.0f s idle", session.id, self.idle_timeout_s)
            await self.close(session.id)
            if session.on_reap is not None:
                try:
                    await session.on_reap()
                except Exception:  # a socket that died under us: the slot is free already
                    log.warning("closing the socket of reaped session %s failed", session.id, exc_info=True)
        return [s.id for s in idle]

    async def run_reaper(self) -> None:
        """Reap forever, checking a few times per timeout; cancelled by the app's lifespan."""
        await reap_periodically(self.idle_timeout_s, self.reap_idle)

    async def close_all(self) -> None:
        for sid in list(self._sessions):
            await self.close(sid)


def _overrides(env: Environment[Any, Any, Any], name: str) -> bool:
    """True when the env class replaces the base's thread-offloading default with its own coroutine."""
    return getattr(type(env), name) is not getattr(Environment, name)
