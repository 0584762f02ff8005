"""Helpers every dialect uses the same way: body validation, API-key headers, ids, text chunks."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from openenv.errors import BadRequest

__all__ = [
    "bearer_token",
    "chunk_text",
    "streamed_pieces",
    "json_schema_format",
    "parse_body",
    "response_id",
    "validation_message",
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
        raise BadRequest(validation_message(exc), param=_first_loc(exc)) from None


def validation_message(exc: ValidationError) -> str:
    """One readable line per problem: where, what was expected, what arrived."""
    lines = []
    for err in exc.errors(include_url=False)[:5]:
        if err["type"] == "json_invalid":
            return f"request body is not valid JSON: {err['msg']}"
        where = ".".join(str(p) for p in err["loc"]) or "body"
        lines.append(f"{where}: {err['msg']}")
    more = len(exc.errors()) - len(lines)
    suffix = f" (and {more} more)" if more > 0 else ""
    return "invalid request: " + "; ".join(lines) + suffix


def _first_loc(exc: ValidationError) -> str | None:
    errors = exc.errors(include_url=False)
    if not errors or not errors[0]["loc"]:
        return None
    return ".".join(str(p) for p in errors[0]["loc"])


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


# Text already streamed to the client, piece by piece (`capture/streaming.py`): a text that starts with
# these pieces is cut at the same places first, so the finished reply's events repeat the streamed ones.
streamed_pieces: ContextVar[tuple[str, ...]] = ContextVar("streamed_pieces", default=())


def chunk_text(text: str, size: int = CHUNK_CHARS) -> Iterator[str]:
    """`text` in consecutive pieces of at most `size` characters (nothing for empty text); a text that
    begins with the `streamed_pieces` of this context is cut at their boundaries first."""
    pieces = streamed_pieces.get()
    start = 0
    if pieces and text.startswith("".join(pieces)):
        yield from pieces
        start = sum(map(len, pieces))
    for start in range(start, len(text), size):
        yield text[start : start + size]


def json_schema_format(holder: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The schema in `holder["format"] = {type: "json_schema", schema: {...}}` (Anthropic
    `output_config`, OpenAI Responses `text`), or None when no JSON schema is asked for."""
    fmt = (holder or {}).get("format")
    if isinstance(fmt, Mapping) and fmt.get("type") == "json_schema" and isinstance(fmt.get("schema"), dict):
        return fmt["schema"]  # type: ignore[no-any-return]
    return None
