"""Turn what goes wrong on the wire into `openenv.errors`: server error bodies and transport failures."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator

import websockets.exceptions
from pydantic import ValidationError

from openenv.core.wire import ErrorBody
from openenv.errors import OpenEnvError, TransportError

__all__ = ["error_from_body", "map_transport_errors"]


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
