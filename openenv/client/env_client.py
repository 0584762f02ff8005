"""`EnvClient`: talks to an env server over its WebSocket, typed by the env's own models.

One async core; `SyncEnvClient` (from `.sync()`) runs that core on a background event loop, the way
httpx pairs `AsyncClient` and `Client`. Declare the models once in the generic base:

    class EchoClient(EnvClient[EchoAction, EchoObservation, State]): ...

    async with EchoClient.from_url("http://127.0.0.1:8000") as env:
        obs = await env.reset(seed=0)
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Mapping
from types import TracebackType
from typing import Any, ClassVar, Generic, Self, TypeVar, get_args, get_origin

import pydantic_core
import websockets.exceptions
from pydantic import ConfigDict, ValidationError
from websockets.asyncio.client import ClientConnection, connect

from openenv.client.errors import error_from_data, map_transport_errors
from openenv.client.replies import ReplyFrame, decode_model, observation_fields, parse_frame
from openenv.core.auth import auth_headers, token_for
from openenv.core.loop_thread import shared_loop
from openenv.core.types import Action, Observation, State
from openenv.core.validation import validation_message
from openenv.errors import BadRequest, InvalidAction, TransportError, UnexpectedReply

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
        self._nest_reset_options = False  # learnt from a server that wants reset keywords under `options`

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
        """Start a new episode; see `Environment.reset`.

        The keywords go to the server as the reference OpenEnv sends them, beside `seed` and
        `episode_id` in the frame's `data`, and reach the env's `reset(seed, episode_id, **options)`.
        """
        data: dict[str, Any] = {
            k: v for k, v in (("seed", seed), ("episode_id", episode_id)) if v is not None
        }
        if self._nest_reset_options:
            frame = await self._request("reset", _json({**data, "options": options}))
        else:
            try:
                frame = await self._request("reset", _json({**data, **options}))
            except BadRequest as err:
                if not (options and _refuses_reset_keywords(err)):
                    raise
                # A server of this package from before the reference's wire: keywords nested in `options`.
                self._nest_reset_options = True
                frame = await self._request("reset", _json({**data, "options": options}))
        return self._observation(frame, "reset")

    async def step(self, action: ActT | Mapping[str, Any]) -> ObsT:
        """Apply one action (a model instance, or a mapping validated into `action_type` first)."""
        if isinstance(action, Action):
            model: Action = action
        else:
            try:
                model = self.action_type.model_validate(action)
            except ValidationError as exc:
                raise InvalidAction(validation_message(exc, "action")) from None
        frame = await self._request("step", model.model_dump_json())
        return self._observation(frame, "step")

    async def state(self) -> StateT:
        frame = await self._request("state")
        _expect(frame, "state", "state")
        return decode_model(self.state_type, frame.data, what="state")  # type: ignore[return-value]  # decode_model returns an instance of the class it is given (state_type)

    def _observation(self, frame: ReplyFrame, during: str) -> ObsT:
        _expect(frame, "observation", during)
        fields = observation_fields(frame.data, self.observation_type.model_fields)
        return decode_model(self.observation_type, fields, what=f"{during} observation")  # type: ignore[return-value]  # decode_model returns an instance of the class it is given (observation_type)

    async def close(self) -> None:
        """Say goodbye (the server frees the session at once) and close the socket. Idempotent."""
        ws, self._ws = self._ws, None
        if ws is not None:
            try:
                with map_transport_errors(self.ws_url):
                    await ws.send('{"type":"close"}')
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

    async def _request(self, kind: str, data_json: str | None = None) -> ReplyFrame:
        """Send one `{"type": kind, "data": ...}` frame (no `data` when None: the reference refuses one
        on `state` and `close`) and read its reply; an error reply is raised as our error."""
        await self.connect()
        assert self._ws is not None
        async with self._lock:  # the protocol has no request ids: one frame in flight per connection
            try:
                with map_transport_errors(self.ws_url):
                    await self._ws.send(
                        f'{{"type":"{kind}"}}'
                        if data_json is None
                        else f'{{"type":"{kind}","data":{data_json}}}'
                    )
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
        frame = parse_frame(raw, during=kind)
        if frame.type == "error":
            raise error_from_data(frame.data, during=kind)
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
        self._loop = shared_loop("openenv-sync-client")  # one for every sync client in the process

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


def _json(data: dict[str, Any]) -> str:
    """JSON for a frame's `data`; pydantic's encoder, so models, paths and datetimes in options travel."""
    return pydantic_core.to_json(data).decode()


def _refuses_reset_keywords(err: BadRequest) -> bool:
    """Whether `err` is an older server of ours refusing reset keywords it wanted under `options`."""
    return (
        err.code == "bad_request"
        and "reset" in err.message
        and "Extra inputs are not permitted" in err.message
    )


def _expect(frame: ReplyFrame, kind: str, during: str) -> None:
    if frame.type != kind:
        raise UnexpectedReply(f"the server answered {during} with a {frame.type!r} frame, not {kind!r}")


def _ws_url(base_url: str) -> str:
    if base_url.startswith("https://"):
        return "wss://" + base_url.removeprefix("https://") + "/ws"
    if base_url.startswith("http://"):
        return "ws://" + base_url.removeprefix("http://") + "/ws"
    if base_url.startswith(("ws://", "wss://")):
        return base_url if base_url.endswith("/ws") else base_url + "/ws"
    raise ValueError(f"expected an http(s):// or ws(s):// URL for the env server, got {base_url!r}")
