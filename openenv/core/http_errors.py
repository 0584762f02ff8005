"""One set of Starlette error handlers for every openenv app: each failure becomes an `OpenEnvError` first.

The env server renders errors as `{"error": {code, message, details}}`, the capture proxy in the
caller's dialect; both hand `install_error_handlers` their one renderer, and Starlette's own answers
(an unknown route, a wrong method, a body that is not UTF-8) and FastAPI's validation errors reach it
as our errors, so no response escapes in FastAPI's `{"detail": ...}` shape.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ValidationError
from starlette.exceptions import HTTPException

from openenv.core.validation import HasErrors, field_errors, json_error, validation_message
from openenv.errors import BadRequest, MalformedMessage, NotFound, OpenEnvError

__all__ = ["ErrorRenderer", "install_error_handlers", "parse_body", "starlette_error", "validation_error"]

ErrorRenderer = Callable[[Request, OpenEnvError], Awaitable[Response]]
M = TypeVar("M", bound=BaseModel)


def install_error_handlers(app: FastAPI, render: ErrorRenderer, *, unknown_route_hint: str = "") -> None:
    """Route `OpenEnvError`, Starlette's `HTTPException` and `RequestValidationError` through `render`.

    Args:
        app: the app to register on.
        render: the app's one renderer of errors.
        unknown_route_hint: appended to a 404's message, e.g. where the app's routes live.
    """

    async def on_starlette(request: Request, exc: HTTPException) -> Response:
        response = await render(request, starlette_error(request, exc, unknown_route_hint))
        response.headers.update(exc.headers or {})  # e.g. a 405's `Allow`
        return response

    async def on_invalid(request: Request, exc: RequestValidationError) -> Response:
        return await render(request, validation_error(exc))

    app.add_exception_handler(OpenEnvError, render)  # type: ignore[arg-type]  # Starlette types handlers as taking Exception; ours take the subclass
    app.add_exception_handler(HTTPException, on_starlette)  # type: ignore[arg-type]  # Starlette types handlers as taking Exception; ours take the subclass
    app.add_exception_handler(RequestValidationError, on_invalid)  # type: ignore[arg-type]  # Starlette types handlers as taking Exception; ours take the subclass


def starlette_error(request: Request, exc: HTTPException, unknown_route_hint: str = "") -> OpenEnvError:
    """Starlette's own answer as our error: a 404 names the route; any other status keeps its code."""
    if exc.status_code == 404:
        return NotFound(f"no route {request.method} {request.url.path}{unknown_route_hint}")
    err = BadRequest(str(exc.detail))
    err.status_code = exc.status_code
    return err


def validation_error(exc: HasErrors) -> OpenEnvError:
    """A body that is not JSON, or fields that do not validate (FastAPI's locs start with "body", "query";
    a pydantic `ValidationError` of a body validated by hand is taken too)."""
    if json_error(exc) is not None:
        return MalformedMessage("the request body is not valid JSON")
    return BadRequest(validation_message(exc, "request"), errors=field_errors(exc))


def parse_body(model: type[M], body: bytes) -> M:
    """`body` validated into `model` by hand (a route that reads its body itself), failing as a body FastAPI
    validated would: `validation_error`'s `MalformedMessage` or `BadRequest`. (The capture proxy's dialects
    have their own, `dialects._shared.parse_body`: their errors name the field as OpenAI's `param`.)"""
    try:
        return model.model_validate_json(body)
    except ValidationError as exc:
        raise validation_error(exc) from None
