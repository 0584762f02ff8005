"""The `Dialect` seam: what one wire format (OpenAI Chat, Anthropic, ...) must provide.

A dialect is pure mapping: wire request -> `CanonicalRequest`, `Completion` -> wire reply or SSE
events, `OpenEnvError` -> wire error. What it remembers between requests (validated history items,
converted histories) lives in a `DialectState` the caller owns and passes in. The app does all I/O and
calls these in a fixed order:

    parse(body, ctx, state) -> to_canonical(req, state) -> [session renders, samples, records] ->
    from_canonical(done, req) | sse_events(done, req);   any OpenEnvError -> error_body(err)

Endpoints that are not generation (Anthropic `count_tokens`, `GET /v1/models`) are named by the
`Endpoint.operation` in the route registry and served by the optional methods below.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel

from openenv.capture.canonical import CanonicalRequest, Completion
from openenv.capture.dialects.state import DialectState
from openenv.errors import OpenEnvError

__all__ = [
    "CountsTokens",
    "Dialect",
    "Endpoint",
    "KEEPALIVE",
    "ListsModels",
    "Operation",
    "RequestContext",
    "ServerSentEvent",
    "StreamStyle",
]

Operation = Literal["generate", "count_tokens", "models"]
Req = TypeVar("Req")  # a dialect's parsed request: its wire model (or one carrying the route's values)


@dataclass(frozen=True, slots=True)
class RequestContext:
    """What the app knows about an HTTP request besides its body.

    Attributes:
        path_params: values of the route's `{name}` placeholders (e.g. Gemini's `model`).
        query: the query string, one value per key (e.g. `?key=`, `?alt=sse`, `?beta=true`).
        headers: lower-cased header names to values.
    """

    path_params: Mapping[str, str] = field(default_factory=dict)
    query: Mapping[str, str] = field(default_factory=dict)
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ServerSentEvent:
    """One SSE frame. `event` is omitted from the wire when None (OpenAI and Gemini style)."""

    data: str
    event: str | None = None

    def encode(self) -> bytes:
        head = f"event: {self.event}\n" if self.event is not None else ""
        return f"{head}data: {self.data}\n\n".encode()


KEEPALIVE = b": keep-alive\n\n"  # an SSE comment: every client ignores it


@dataclass(frozen=True, slots=True)
class StreamStyle:
    """How a dialect's live stream differs from the events `sse_events` makes, which the streaming path
    asks instead of branching on the dialect's name.

    Attributes:
        error_event: the SSE `event:` of an error sent after the stream began (None: a bare data frame).
        ping: the keep-alive frame once the reply's first event went out (before it: an SSE comment).
        holds_last: the last event carries the finish reason and usage, so the newest event waits for
            the next one (or goes out with the finished reply): an event sent can never turn out last.
    """

    error_event: str | None = None
    ping: bytes = KEEPALIVE
    holds_last: bool = False


@runtime_checkable
class Dialect(Protocol[Req]):
    """One wire format, over its own request type `Req` (what `parse` returns and the other methods
    take). Set `name` and `stream_style` in ALL implementations; keep every method pure."""

    name: str
    stream_style: StreamStyle

    def parse(self, body: bytes, ctx: RequestContext, state: DialectState) -> Req:
        """Validate the raw body into the dialect's wire request model (`state` remembers the history
        items already validated).

        Raises:
            BadRequest: the body is not JSON or does not fit the wire model; the message says which
                field and what was expected.
        """
        ...

    def to_canonical(self, req: Req, state: DialectState) -> CanonicalRequest:
        """Map a validated wire request to the canonical request (system -> messages -> params ->
        tools -> tool_choice; `state` remembers converted histories). Raises `Unsupported` for what we
        refuse (e.g. `n>1`)."""
        ...

    def from_canonical(self, done: Completion, req: Req) -> BaseModel:
        """The non-streamed wire reply for a completion."""
        ...

    def sse_events(self, done: Completion, req: Req) -> Iterator[ServerSentEvent]:
        """The exact streamed event sequence for an already-finished completion."""
        ...

    def error_body(self, err: OpenEnvError) -> tuple[int, BaseModel]:
        """The HTTP status and wire error body for an error, in this dialect's format."""
        ...

    def session_token(self, ctx: RequestContext) -> str | None:
        """The session token from the dialect's API-key header or query (path routing aside)."""
        ...


@runtime_checkable
class CountsTokens(Protocol):
    """A dialect with a token-counting endpoint (answered by the tokenizer, tagged aux)."""

    def count_tokens_body(self, n_tokens: int, req: Any) -> BaseModel: ...


@runtime_checkable
class ListsModels(Protocol):
    """A dialect with a model-listing endpoint (probes are answered, never recorded)."""

    def models_body(self, models: list[str], ctx: RequestContext) -> BaseModel: ...


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A route's dialect and what the route does."""

    dialect: Dialect[Any]
    operation: Operation = "generate"
