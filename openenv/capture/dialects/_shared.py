"""Helpers every dialect uses the same way: body validation, API-key headers, ids, text chunks, and the
OpenAI error format that both OpenAI dialects (Chat Completions, Responses) answer in."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from types import MappingProxyType
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from openenv.core.validation import field_path, json_error, validation_message
from openenv.errors import BackendUnavailable, BadRequest, OpenEnvError

__all__ = [
    "OpenAIErrorBody",
    "OpenAIErrorDetail",
    "bearer_token",
    "chunk_text",
    "json_schema_format",
    "openai_error_body",
    "parse_body",
    "response_id",
    "streamed_pieces",
]

M = TypeVar("M", bound=BaseModel)

# Streamed text is cut into pieces of this many characters: enough deltas to exercise a client's
# accumulator, few enough to keep synthesis cheap.
CHUNK_CHARS = 48


def parse_body(model: type[M], body: bytes) -> M:
    """Validate a raw JSON body into `model`.

    Raises:
        BadRequest: the body is empty, not JSON, not an object, or misses/mistypes a field.
    """
    if not body.strip():
        raise BadRequest("request body is empty; expected a JSON object")
    try:
        return model.model_validate_json(body)
    except ValidationError as exc:
        raise BadRequest(_invalid_body_message(exc), param=_first_loc(exc)) from None


def _invalid_body_message(exc: ValidationError) -> str:
    if (reason := json_error(exc)) is not None:
        return f"request body is not valid JSON: {reason}"
    return validation_message(exc, "request")


def _first_loc(exc: ValidationError) -> str | None:
    errors = exc.errors(include_url=False)
    return field_path(errors[0]["loc"]) if errors and errors[0]["loc"] else None


def bearer_token(headers: Mapping[str, str], *names: str) -> str | None:
    """The token in `Authorization: Bearer ...` or, failing that, in the first of `names` present."""
    auth = headers.get("authorization", "")
    if auth.lower().startswith("bearer ") and auth[7:].strip():
        return auth[7:].strip()
    for name in names:
        if headers.get(name):
            return headers[name].strip()
    return None


def response_id(prefix: str, turn_id: str) -> str:
    """A dialect's response id derived from the turn id, so replays give the same id."""
    return f"{prefix}{turn_id}"


# Text already streamed to the client, piece by piece, per channel (`text`, `reasoning`; see
# `capture/streaming.py`): a channel's text that starts with its pieces is cut at the same places first, so
# the finished reply's events repeat the streamed ones.
streamed_pieces: ContextVar[Mapping[str, tuple[str, ...]]] = ContextVar(
    "streamed_pieces", default=MappingProxyType({})
)


def chunk_text(text: str, size: int = CHUNK_CHARS, *, channel: str = "text") -> Iterator[str]:
    """`text` in consecutive pieces of at most `size` characters (nothing for empty text); a text that
    begins with the `streamed_pieces` of its `channel` in this context is cut at their boundaries first."""
    pieces = streamed_pieces.get().get(channel, ())
    start = 0
    if pieces and text.startswith("".join(pieces)):
        yield from pieces
        start = sum(map(len, pieces))
    for offset in range(start, len(text), size):
        yield text[offset : offset + size]


def json_schema_format(holder: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The schema in `holder["format"] = {type: "json_schema", schema: {...}}` (Anthropic
    `output_config`, OpenAI Responses `text`), or None when no JSON schema is asked for."""
    fmt = (holder or {}).get("format")
    if isinstance(fmt, Mapping) and fmt.get("type") == "json_schema" and isinstance(fmt.get("schema"), dict):
        return fmt["schema"]
    return None


class OpenAIErrorDetail(BaseModel):
    """The `error` object of an OpenAI error reply (https://platform.openai.com/docs/guides/error-codes)."""

    model_config = ConfigDict(extra="forbid")

    message: str
    type: str
    param: str | None = None
    code: str | None = None


class OpenAIErrorBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    error: OpenAIErrorDetail


_OPENAI_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    429: "rate_limit_error",
    503: "service_unavailable",
}


def openai_error_body(err: OpenEnvError) -> tuple[int, OpenAIErrorBody]:
    """The HTTP status and OpenAI error JSON for an error: what both OpenAI dialects answer (the SDK
    retries 429, 503 and the other 5xx)."""
    status = err.status_code
    kind = _OPENAI_ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    if isinstance(err, BackendUnavailable):
        kind = "service_unavailable"
    param = err.details.get("param")
    detail = OpenAIErrorDetail(
        message=err.message, type=kind, code=err.code, param=param if isinstance(param, str) else None
    )
    return status, OpenAIErrorBody(error=detail)
