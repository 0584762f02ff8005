"""The env server's wire protocol, shared by the server and `EnvClient` so the two cannot drift.

HTTP is stateful: `POST /reset` opens a session and answers its id (body field and `X-Session-Id`
header); `POST /step`, `GET /state` and `DELETE /session` name it in the `X-Session-Id` header (or, for
POST, a `session_id` body field). WebSocket `/ws` holds one session per connection, and carries
`{"type": "reset"|"step"|"state"|"close", "data": {...}}`. Every reply is `{"type", "data"}`; failures
are `{"type": "error", "data": {"code", "message", "details"}}`, and over HTTP `{"error": {...}}`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from openenv.errors import OpenEnvError

__all__ = [
    "SESSION_HEADER",
    "ClientMessage",
    "CloseMessage",
    "ErrorBody",
    "ErrorReply",
    "HTTPError",
    "ResetMessage",
    "ResetRequest",
    "ServerFrame",
    "SessionReply",
    "StateMessage",
    "StepMessage",
    "StepRequest",
    "client_message_adapter",
    "encode_frame",
]

SESSION_HEADER = "X-Session-Id"

_STRICT = ConfigDict(extra="forbid")


class ResetRequest(BaseModel):
    """Arguments of `Environment.reset`; `options` are passed through as keyword arguments."""

    model_config = _STRICT

    seed: int | None = Field(default=None, strict=True)  # JSON `false` is not seed 0 (schemathesis)
    episode_id: str | None = None
    options: dict[str, Any] = Field(default_factory=dict)
    session_id: str | None = Field(default=None, description="HTTP only: reset this live session again.")


class StepRequest(BaseModel):
    """An HTTP step: the action as JSON, validated against the env's action model by the server."""

    model_config = _STRICT

    action: dict[str, Any]
    session_id: str | None = None


class ResetMessage(BaseModel):
    model_config = _STRICT

    type: Literal["reset"]
    data: ResetRequest = Field(default_factory=ResetRequest)


class StepMessage(BaseModel):
    model_config = _STRICT

    type: Literal["step"]
    data: dict[str, Any] = Field(description="The action, validated against the env's action model.")


class StateMessage(BaseModel):
    model_config = _STRICT

    type: Literal["state"]
    data: dict[str, Any] = Field(default_factory=dict)


class CloseMessage(BaseModel):
    model_config = _STRICT

    type: Literal["close"]
    data: dict[str, Any] = Field(default_factory=dict)


ClientMessage = Annotated[
    ResetMessage | StepMessage | StateMessage | CloseMessage, Field(discriminator="type")
]
client_message_adapter: TypeAdapter[ResetMessage | StepMessage | StateMessage | CloseMessage] = TypeAdapter(
    ClientMessage
)


class ErrorBody(BaseModel):
    """A failure, named by the `code` of its `openenv.errors` class."""

    model_config = _STRICT

    code: str
    message: str
    details: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def of(cls, err: OpenEnvError) -> ErrorBody:
        return cls(code=err.code, message=err.message, details=_jsonable(err.details))


class ErrorReply(BaseModel):
    """A WebSocket error frame; the connection stays open unless the session is gone."""

    model_config = _STRICT

    type: Literal["error"] = "error"
    data: ErrorBody


class HTTPError(BaseModel):
    """The body of every non-2xx HTTP answer."""

    model_config = _STRICT

    error: ErrorBody


class ServerFrame(BaseModel):
    """Any WebSocket frame the server sends; `data` is decoded by the client's typed models."""

    model_config = _STRICT

    type: Literal["observation", "state", "closed", "error"]
    data: dict[str, Any] = Field(default_factory=dict)


def encode_frame(kind: Literal["observation", "state", "closed"], payload: BaseModel | None = None) -> str:
    """Serialize a reply frame; the payload is dumped by its own (sub)class, so env fields survive."""
    data = payload.model_dump_json() if payload is not None else "{}"
    return f'{{"type":"{kind}","data":{data}}}'


class SessionReply(BaseModel):
    """An HTTP answer to reset or step: the session it concerns and the observation as JSON."""

    model_config = _STRICT

    session_id: str
    observation: dict[str, Any]


def _jsonable(details: dict[str, Any]) -> dict[str, Any]:
    """Error details go on the wire; anything JSON cannot carry is sent as its repr."""
    safe = (str, int, float, bool, type(None), list, dict)
    return {k: v if isinstance(v, safe) else repr(v) for k, v in details.items()}
