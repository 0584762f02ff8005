"""Turn what goes wrong on the wire into `openenv.errors`: server error bodies and transport failures.

Two error shapes arrive in a WebSocket `{"type": "error", "data": ...}` frame:
  - ours: `{"code": "invalid_action", "message": ..., "details": {...}}`, the `code` of an `openenv.errors`
    class;
  - the reference OpenEnv's: `{"code": "VALIDATION_ERROR", "message": "Invalid message", "errors": [pydantic
    errors], ...}` with the codes of its `WSErrorCode`, mapped below onto our classes.
Either way the caller catches one hierarchy; no shape ever surfaces as a raw pydantic `ValidationError`.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

import websockets.exceptions
from pydantic import ValidationError

from openenv.core.validation import validation_message
from openenv.core.wire import ErrorBody
from openenv.errors import (
    BadRequest,
    CapacityError,
    EnvError,
    InvalidAction,
    MalformedMessage,
    OpenEnvError,
    TransportError,
    UnexpectedReply,
    UnknownMessageType,
)

__all__ = ["error_from_body", "error_from_data", "map_transport_errors"]

# The reference's `WSErrorCode` values, by the class of ours that means the same.
_REFERENCE_CODES: dict[str, type[OpenEnvError]] = {
    "INVALID_JSON": MalformedMessage,
    "UNKNOWN_TYPE": UnknownMessageType,
    "VALIDATION_ERROR": BadRequest,  # InvalidAction when the frame was a step (see error_from_data)
    "EXECUTION_ERROR": EnvError,
    "CAPACITY_REACHED": CapacityError,
    "FACTORY_ERROR": EnvError,
    "SESSION_ERROR": EnvError,
}


def _by_code() -> dict[str, type[OpenEnvError]]:
    found: dict[str, type[OpenEnvError]] = {}
    pending: list[type[OpenEnvError]] = [OpenEnvError]
    while pending:
        cls = pending.pop()
        found.setdefault(cls.code, cls)
        pending.extend(cls.__subclasses__())
    return found


def error_from_body(body: ErrorBody) -> OpenEnvError:
    """The `openenv.errors` class whose `code` the server sent, carrying its message and details."""
    cls = _by_code().get(body.code, OpenEnvError)
    err = cls.__new__(cls)
    OpenEnvError.__init__(err, body.message, **body.details)  # bypass subclass signatures (CapacityError)
    if cls is OpenEnvError:
        err.code = body.code
    return err


def error_from_data(data: object, *, during: str) -> OpenEnvError:
    """The error a server's error frame `data` stands for, in either shape (see the module docstring).

    Args:
        data: the frame's `data`, as decoded JSON.
        during: the message type that was answered (`reset`, `step`, `state`): a reference
            `VALIDATION_ERROR` on a step is an `InvalidAction`, elsewhere a `BadRequest`.
    """
    if not isinstance(data, dict):
        return UnexpectedReply(f"the server answered {during} with an error frame whose data is {data!r}")
    if data.get("code") not in _REFERENCE_CODES:
        try:
            return error_from_body(ErrorBody.model_validate(data))
        except ValidationError:
            pass
    code, message = data.get("code"), data.get("message")
    if not isinstance(code, str) or not isinstance(message, str):
        return UnexpectedReply(f"the server answered {during} with an unreadable error: {data!r}"[:500])
    cls = _REFERENCE_CODES.get(code, OpenEnvError)
    if cls is BadRequest and during == "step":
        cls = InvalidAction
    details = {k: v for k, v in data.items() if k not in ("code", "message")}
    problems = _pydantic_problems(details.get("errors"), "action" if cls is InvalidAction else "message")
    if problems:
        message = f"{message}: {problems}"
    err = cls.__new__(cls)
    OpenEnvError.__init__(err, message, server_code=code, **details)
    if cls is OpenEnvError:
        err.code = code.lower()
    return err


def _pydantic_problems(errors: object, what: str) -> str:
    """The one-line field message (`openenv.core.validation`) for the pydantic error list a reference
    server sends with VALIDATION_ERROR; empty when there is none."""
    if not isinstance(errors, list):
        return ""
    listed = [e for e in errors if isinstance(e, dict) and isinstance(e.get("loc"), list) and "msg" in e]
    return validation_message(_Listed(listed), what) if listed else ""


class _Listed:
    """Already-listed pydantic errors, in the shape `validation_message` reads."""

    def __init__(self, errors: list[dict[str, Any]]) -> None:
        self._errors = errors

    def errors(self) -> list[dict[str, Any]]:
        return self._errors


@contextlib.contextmanager
def map_transport_errors(url: str) -> Iterator[None]:
    """The one place websockets/socket failures become `TransportError` naming the server and cause."""
    try:
        yield
    except websockets.exceptions.ConnectionClosed as exc:
        why = exc.rcvd.reason if exc.rcvd is not None and exc.rcvd.reason else "no reason given"
        code = exc.rcvd.code if exc.rcvd is not None else None
        raise TransportError(f"the connection to {url} closed ({why})", close_code=code) from exc
    except websockets.exceptions.InvalidStatus as exc:
        refused = _refusal(exc)
        if refused is None:
            raise TransportError(f"the env server at {url} refused the WebSocket: {exc}") from exc
        raise refused from None
    except (websockets.exceptions.WebSocketException, OSError, TimeoutError) as exc:
        raise TransportError(f"cannot talk to the env server at {url}: {type(exc).__name__}: {exc}") from exc


def _refusal(exc: websockets.exceptions.InvalidStatus) -> OpenEnvError | None:
    """The server's own error (401 no token, 403 foreign Origin/Host) from a refused handshake's body."""
    try:
        body = json.loads(exc.response.body or b"")
        return error_from_body(ErrorBody.model_validate(body["error"]))
    except (ValueError, KeyError, TypeError, ValidationError):
        return None
