"""The env server's wire protocol, shared by the server and `EnvClient` so the two cannot drift.

It is the reference OpenEnv's protocol (`openenv==0.10.0`, docs/interop.md), so its clients drive our
servers unchanged:

- WebSocket `/ws` holds one session per connection and carries `{"type": "reset"|"step"|"state"|"close"|
  "mcp", "data": {...}}`. `reset` data are the keyword arguments of `Environment.reset`; `step` data are
  the action; `mcp` data are one JSON-RPC request. Replies are `{"type", "data"}`; an observation goes
  out nested, `{"observation": {...fields}, "reward": r, "done": d}` (`metadata` beside them when set).
- Failures are `{"type": "error", "data": {"code", "message", "details"}}` (the reference reads
  `message` and `code`), and over HTTP `{"error": {...}}`.

What is ours only is additive, so a reference client can ignore it: HTTP is stateful. `POST /reset`
opens a session and answers its id beside the reference's fields (body `session_id` and the
`X-Session-Id` header); `POST /step`, `GET /state` and `DELETE /session` name it in that header (or, for
POST, a `session_id` body field).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter
from pydantic_core import to_json

from openenv.core.types import Observation
from openenv.errors import BadRequest, OpenEnvError

__all__ = [
    "SESSION_HEADER",
    "ClientMessage",
    "CloseMessage",
    "ErrorBody",
    "ErrorReply",
    "HTTPError",
    "McpMessage",
    "ResetMessage",
    "ResetRequest",
    "SessionReply",
    "StateMessage",
    "StepMessage",
    "StepRequest",
    "client_message_adapter",
    "encode_frame",
    "observation_json",
]

SESSION_HEADER = "X-Session-Id"

_STRICT = ConfigDict(extra="forbid")


class ResetRequest(BaseModel):
    """Arguments of `Environment.reset`, as the reference sends them: `seed`, `episode_id` and any other
    key as a keyword argument (`task=...`). An `options` object is merged into those keywords too (the
    shape our clients sent before the reference's; a keyword given both ways is a 400)."""

    model_config = ConfigDict(extra="allow")

    seed: int | None = Field(default=None, strict=True)  # JSON `false` is not seed 0 (schemathesis)
    episode_id: str | None = None
    options: dict[str, Any] = Field(default_factory=dict, description="Legacy: keywords as one object.")
    session_id: str | None = Field(default=None, description="HTTP only: reset this live session again.")

    def env_options(self) -> dict[str, Any]:
        """The keyword arguments for `reset` beyond `seed` and `episode_id`.

        Raises:
            BadRequest: a keyword is given both at the top level and inside `options`.
        """
        extra = dict(self.__pydantic_extra__ or {})
        if clash := sorted(set(extra) & set(self.options)):
            raise BadRequest(
                f"reset keyword(s) {', '.join(map(repr, clash))} given both at the top level and "
                "in 'options'; send each once (top level, as the reference OpenEnv does)"
            )
        return {**self.options, **extra}


class StepRequest(BaseModel):
    """An HTTP step: the action as JSON, validated against the env's action model by the server."""

    model_config = _STRICT

    action: dict[str, Any]
    session_id: str | None = None
    # The reference's optional step fields, accepted so its requests validate: the step's wall-clock
    # budget is the env's own here (a harness episode's deadline), and the id is only echoed in logs.
    timeout_s: float | None = Field(default=None, gt=0, strict=True)  # "5" is not a number (schemathesis)
    request_id: str | None = Field(default=None, max_length=255, strict=True)


class ResetMessage(BaseModel):
    model_config = _STRICT

    type: Literal["reset"]
    data: ResetRequest = Field(default_factory=ResetRequest)


class McpMessage(BaseModel):
    """One JSON-RPC request over the session's WebSocket (the reference's `mcp` message); it is checked
    as JSON-RPC by the MCP handler, which answers errors in JSON-RPC's shape."""

    model_config = _STRICT

    type: Literal["mcp"]
    data: dict[str, Any] = Field(default_factory=dict)


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
    ResetMessage | StepMessage | StateMessage | CloseMessage | McpMessage, Field(discriminator="type")
]
client_message_adapter: TypeAdapter[ResetMessage | StepMessage | StateMessage | CloseMessage | McpMessage] = (
    TypeAdapter(ClientMessage)
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


_NOT_NESTED = {"reward", "done"}


def observation_json(obs: Observation) -> str:
    """An observation as the reference sends it: `{"observation": {...}, "reward", "done"}`, with
    `metadata` also beside them when it is not empty (the reference's `serialize_observation`).

    Dumped by the observation's own (sub)class, so env fields survive without re-validation.
    """
    fields = obs.model_dump_json(exclude=_NOT_NESTED)
    reward = "null" if obs.reward is None else to_json(obs.reward, inf_nan_mode="null").decode()
    done = "true" if obs.done else "false"
    meta = f',"metadata":{to_json(obs.metadata).decode()}' if obs.metadata else ""
    return f'{{"observation":{fields},"reward":{reward},"done":{done}{meta}}}'


def encode_frame(kind: Literal["observation", "state", "closed"], payload: BaseModel | None = None) -> str:
    """Serialize a reply frame; the payload is dumped by its own (sub)class, so env fields survive.
    An observation goes out nested, as the reference's clients read it (`observation_json`)."""
    if payload is None:
        data = "{}"
    elif isinstance(payload, Observation):
        data = observation_json(payload)
    else:
        data = payload.model_dump_json()
    return f'{{"type":"{kind}","data":{data}}}'


class SessionReply(BaseModel):
    """An HTTP answer to reset or step: the reference's `{observation, reward, done}` (and `metadata`
    when set), plus ours only: the id of the session it concerns."""

    model_config = _STRICT

    observation: dict[str, Any]
    reward: float | None = None
    done: bool = False
    metadata: dict[str, Any] | None = None
    session_id: str


def _jsonable(details: dict[str, Any]) -> dict[str, Any]:
    """Error details go on the wire; anything JSON cannot carry is sent as its repr."""
    safe = (str, int, float, bool, type(None), list, dict)
    return {k: v if isinstance(v, safe) else repr(v) for k, v in details.items()}
