"""`EnvClient`: talks to an env server over its WebSocket, typed by the env's own models.

One async core; `SyncEnvClient` (from `.sync()`) runs that core on a background event loop, the way
httpx pairs `AsyncClient` and `Client`. Declare the models once in the generic base:

    class EchoClient(EnvClient[EchoAction, EchoObservation, State]): ...

    async with EchoClient.from_url("http://127.0.0.1:8000") as env:
        obs = await env.reset(seed=0)
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine, Mapping
from types import TracebackType
from typing import Any, ClassVar, Generic, Self, TypeVar, get_args, get_origin

import websockets.exceptions
from pydantic import ConfigDict, ValidationError
from websockets.asyncio.client import ClientConnection, connect

from openenv.client.errors import error_from_body, map_transport_errors
from openenv.core.auth import auth_headers, token_for
from openenv.core.loop_thread import LoopThread
from openenv.core.types import Action, Observation, State
from openenv.core.validation import validation_message
from openenv.core.wire import ErrorBody, ResetRequest, ServerFrame
from openenv.errors import InvalidAction, TransportError

__all__ = ["AnyAction", "AnyObservation", "AnyState", "EnvClient", "SyncEnvClient"]

ActT = TypeVar("ActT", bound=Action)
ObsT = TypeVar("ObsT", bound=Observation)
StateT = TypeVar("StateT", bound=State)
T = TypeVar("T")

_LENIENT = ConfigDict(extra="allow")


class AnyAction(Action):
    """An action for a server whose models this process does not have: any fields, checked server-side."""

    model_config = _LENIENT


class AnyObservation(Observation):
    """An observation whose env-specific fields are kept as extra attributes."""

    model_config = _LENIENT


class AnyState(State):
    model_config = _LENIENT


class EnvClient(Generic[ActT, ObsT, StateT]):
    """Async client for one session on an env server (one WebSocket, one env instance)."""

    # Filled from the generic arguments of a subclass, or passed to the constructor.
    action_type: ClassVar[type[Action]] = AnyAction
    observation_type: ClassVar[type[Observation]] = AnyObservation
    state_type: ClassVar[type[State]] = AnyState

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for base in getattr(cls, "__orig_bases__", ()):
            origin, args = get_origin(base), get_args(base)
            if (
                isinstance(origin, type)
                and issubclass(origin, EnvClient)
                and all(isinstance(a, type) for a in args)
            ):
                cls.action_type, cls.observation_type, cls.state_type = args

    def __init__(
        self,
        base_url: str,
        *,
        open_timeout_s: float = 10.0,
        request_timeout_s: float | None = None,
        on_close: Callable[[], None] | None = None,
        token: str | None = None,
    ) -> None:
        """
        Args:
            base_url: The server's `http(s)://host:port`; the client connects to its `/ws`.
            open_timeout_s: How long to wait for the WebSocket handshake.
            request_timeout_s: How long to wait for each reply (None: as long as the env takes).
            on_close: Called once after the connection closes (e.g. to stop a server this client owns).
            token: The server's bearer token. Default: found by `openenv.core.auth.token_for` (a server
                this process started, `$OPENENV_TOKEN`, or the token file `openenv serve` left for
                this user on a loopback port).
        """
        self.base_url = base_url.rstrip("/")
        self.ws_url = _ws_url(self.base_url)
        self.open_timeout_s = open_timeout_s
        self.request_timeout_s = request_timeout_s
        self._on_close = on_close
        self._token = token
        self._ws: ClientConnection | None = None
        self._lock = asyncio.Lock()

    @property
    def token(self) -> str | None:
        """The bearer token this client sends (given, or found for its URL); None when none is known."""
        return self._token or token_for(self.base_url)

    @classmethod
    def from_url(cls, base_url: str, **kwargs: Any) -> Self:
        """A client for the server at `base_url`; it connects on `async with` or `connect()`."""
        return cls(base_url, **kwargs)

    async def connect(self) -> Self:
        if self._ws is None:
            with map_transport_errors(self.ws_url):
                self._ws = await connect(
                    self.ws_url,
                    additional_headers=auth_headers(self.base_url, self.token),
                    open_timeout=self.open_timeout_s,
                    compression=None,
                    proxy=None,
                    max_size=64 * 2**20,
                    ping_interval=None,
                )
        return self

    async def reset(self, seed: int | None = None, episode_id: str | None = None, **options: Any) -> ObsT:
        """Start a new episode; see `Environment.reset`."""
        req = ResetRequest(seed=seed, episode_id=episode_id, options=options)
        frame = await self._request("reset", req.model_dump_json(exclude_defaults=True))
        return self.observation_type.model_validate(frame.data)  # type: ignore[return-value]

    async def step(self, action: ActT | Mapping[str, Any]) -> ObsT:
        """Apply one action (a model instance, or a mapping validated into `action_type` first)."""
        if not isinstance(action, Action):
            try:
                action = self.action_type.model_validate(action)  # type: ignore[assignment]
            except ValidationError as exc:
                raise InvalidAction(validation_message(exc, "action")) from None
        frame = await self._request("step", action.model_dump_json())  # type: ignore[union-attr]
        return self.observation_type.model_validate(frame.data)  # type: ignore[return-value]

    async def state(self) -> StateT:
        frame = await self._request("state", "{}")
        return self.state_type.model_validate(frame.data)  # type: ignore[return-value]

    async def close(self) -> None:
        """Say goodbye (the server frees the session at once) and close the socket. Idempotent."""
        ws, self._ws = self._ws, None
        if ws is not None:
            try:
                with map_transport_errors(self.ws_url):
                    await ws.send('{"type":"close","data":{}}')
                    await ws.close()
            except TransportError:
                pass  # the server is gone already; nothing left to free
        if self._on_close is not None:
            on_close, self._on_close = self._on_close, None
            on_close()

    def sync(self) -> SyncEnvClient[ActT, ObsT, StateT]:
        """A blocking twin over this client; call it before connecting."""
        if self._ws is not None:
            raise RuntimeError("sync() wraps an unconnected client; call it before connect()/async with")
        return SyncEnvClient(self)

    async def _request(self, kind: str, data_json: str) -> ServerFrame:
        await self.connect()
        assert self._ws is not None
        async with self._lock:  # the protocol has no request ids: one frame in flight per connection
            try:
                with map_transport_errors(self.ws_url):
                    await self._ws.send(f'{{"type":"{kind}","data":{data_json}}}')
                    raw = await asyncio.wait_for(self._ws.recv(), self.request_timeout_s)
            except TransportError as exc:
                if isinstance(exc.__cause__, TimeoutError):
                    await self._abandon()  # a late reply would otherwise answer the next request
                    raise TransportError(
                        f"no reply to {kind} from {self.ws_url} within {self.request_timeout_s:g} s; "
                        "the connection was closed and its session freed"
                    ) from exc
                last = await self._last_words()
                if last is None:
                    raise
                raw = last
        frame = ServerFrame.model_validate_json(raw)
        if frame.type == "error":
            raise error_from_body(ErrorBody.model_validate(frame.data))
        return frame

    async def _abandon(self) -> None:
        ws, self._ws = self._ws, None
        if ws is not None:
            await ws.close()

    async def _last_words(self) -> str | bytes | None:
        """A frame the server sent just before hanging up (a `capacity` error), if one is buffered."""
        assert self._ws is not None
        try:
            return await asyncio.wait_for(self._ws.recv(), 0.5)
        except (websockets.exceptions.ConnectionClosed, TimeoutError):
            return None

    async def __aenter__(self) -> Self:
        return await self.connect()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()


class SyncEnvClient(Generic[ActT, ObsT, StateT]):
    """Blocking twin of `EnvClient`: the same core, run on a background event loop thread."""

    def __init__(self, client: EnvClient[ActT, ObsT, StateT]) -> None:
        self.client = client
        self._loop = _background_loop()

    @property
    def action_type(self) -> type[Action]:
        return self.client.action_type

    @property
    def observation_type(self) -> type[Observation]:
        return self.client.observation_type

    def connect(self) -> Self:
        self._run(self.client.connect())
        return self

    def reset(self, seed: int | None = None, episode_id: str | None = None, **options: Any) -> ObsT:
        return self._run(self.client.reset(seed, episode_id, **options))

    def step(self, action: ActT | Mapping[str, Any]) -> ObsT:
        return self._run(self.client.step(action))

    def state(self) -> StateT:
        return self._run(self.client.state())

    def close(self) -> None:
        self._run(self.client.close())

    def __enter__(self) -> Self:
        return self.connect()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self._loop.run(coro)


_loop: LoopThread | None = None
_loop_lock = threading.Lock()


def _background_loop() -> LoopThread:
    """One daemon event-loop thread shared by every sync client in the process."""
    global _loop
    with _loop_lock:
        if _loop is None or not _loop.running:
            _loop = LoopThread("openenv-sync-client").start()
        return _loop


def _ws_url(base_url: str) -> str:
    if base_url.startswith("https://"):
        return "wss://" + base_url.removeprefix("https://") + "/ws"
    if base_url.startswith("http://"):
        return "ws://" + base_url.removeprefix("http://") + "/ws"
    if base_url.startswith(("ws://", "wss://")):
        return base_url if base_url.endswith("/ws") else base_url + "/ws"
    raise ValueError(f"expected an http(s):// or ws(s):// URL for the env server, got {base_url!r}")
