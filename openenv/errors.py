"""One error hierarchy for openenv; every layer raises these and each edge renders them once.

OpenEnvError
├── BadRequest              the caller sent something we cannot accept (4xx)
│   ├── InvalidAction       an action failed validation against the env's model
│   ├── MalformedMessage    a body or WebSocket frame that is not valid JSON
│   ├── UnknownMessageType  a WebSocket frame whose `type` the server does not handle
│   ├── Unsupported         a valid request for a feature we refuse on purpose (n>1, ...)
│   ├── PayloadTooLarge     a body or frame over the server's size cap (413)
│   └── UnsupportedMediaType a body that is not `application/json` (415)
├── Unauthorized            a protected API called without its key
├── Forbidden               a request from a place the server does not serve (Origin, Host) (403)
├── NotFound                an unknown session, env or route target
│   └── UnknownSession      a session id or token that is not (or no longer) live
├── CapacityError           a server is at its configured session limit
├── BackendUnavailable      the inference backend is down, slow or failing (retryable)
├── EnvError                an environment failed while handling a valid request
│   └── SandboxLost         a sandbox's container vanished or stopped under a live episode
└── TransportError          a client lost (or never got) its connection to an env server
    └── UnexpectedReply     a server answered something the client cannot read (not a frame, wrong model)
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "BackendUnavailable",
    "BadRequest",
    "CapacityError",
    "EnvError",
    "Forbidden",
    "InvalidAction",
    "MalformedMessage",
    "NotFound",
    "OpenEnvError",
    "PayloadTooLarge",
    "SandboxLost",
    "TransportError",
    "Unauthorized",
    "UnexpectedReply",
    "UnknownMessageType",
    "UnknownSession",
    "Unsupported",
    "UnsupportedMediaType",
]


class OpenEnvError(Exception):
    """Base of every error openenv raises on purpose."""

    status_code: int = 500
    code: str = "internal_error"

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details


class BadRequest(OpenEnvError):
    """Raised when the caller's request is malformed or invalid."""

    status_code = 400
    code = "bad_request"


class InvalidAction(BadRequest):
    """Raised when an action does not validate against the environment's action model."""

    code = "invalid_action"


class MalformedMessage(BadRequest):
    """Raised when a request body or WebSocket frame is not valid JSON."""

    code = "malformed_json"


class UnknownMessageType(BadRequest):
    """Raised when a WebSocket frame's `type` is missing or not one the server handles."""

    code = "unknown_message_type"


class Unsupported(BadRequest):
    """Raised when a well-formed request asks for something openenv refuses by design."""

    code = "unsupported"


class PayloadTooLarge(BadRequest):
    """Raised when a request body or WebSocket frame is larger than the server accepts."""

    status_code = 413
    code = "payload_too_large"


class UnsupportedMediaType(BadRequest):
    """Raised when a request body is not JSON by its `Content-Type` (a cross-site form or text POST)."""

    status_code = 415
    code = "unsupported_media_type"


class Forbidden(OpenEnvError):
    """Raised when a request comes from where the server does not serve: a foreign web page (`Origin`)
    or a name it does not answer to (`Host`, DNS rebinding)."""

    status_code = 403
    code = "forbidden"


class Unauthorized(OpenEnvError):
    """Raised when a protected API (the capture proxy's admin routes) is called without its key."""

    status_code = 401
    code = "unauthorized"


class NotFound(OpenEnvError):
    """Raised when a named thing does not exist."""

    status_code = 404
    code = "not_found"


class UnknownSession(NotFound):
    """Raised when a session id or token is not live (never issued, closed or reaped)."""

    status_code = 401
    code = "unknown_session"


class CapacityError(OpenEnvError):
    """Raised when a server already holds its maximum number of sessions."""

    status_code = 503
    code = "capacity"

    def __init__(self, active: int, maximum: int) -> None:
        super().__init__(
            f"server is at capacity: {active} of {maximum} sessions are live; "
            "close a session or raise max_sessions",
            active=active,
            maximum=maximum,
        )


class BackendUnavailable(OpenEnvError):
    """Raised when the inference backend cannot answer; callers should retry."""

    status_code = 503
    code = "backend_unavailable"


class EnvError(OpenEnvError):
    """Raised when an environment fails while handling a valid request."""

    status_code = 500
    code = "env_error"


class SandboxLost(EnvError):
    """Raised when a sandbox's container was killed, removed or stopped from outside mid-episode."""

    code = "sandbox_lost"


class TransportError(OpenEnvError):
    """Raised on the client side when the connection to an env server fails, times out or drops."""

    status_code = 502
    code = "transport_error"


class UnexpectedReply(TransportError):
    """Raised on the client side when a server's reply does not decode: not a frame in any protocol the
    client speaks, or an observation/state its typed models reject (a client typed for another env)."""

    code = "unexpected_reply"
