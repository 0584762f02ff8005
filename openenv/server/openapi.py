"""The env server's OpenAPI document, made to say what the server really does.

FastAPI's generated document describes the routes' Python signatures: an untyped `action` object, an
untyped observation, no schema for `GET /state`, and a 422 answer the server never gives (its one
error handler answers 400, 401, 500 or 503 with `{"error": {code, message, details}}`). Clients,
generated SDKs and schemathesis (tests/reliability/test_schemathesis.py) read this document, so it is
rewritten once here: the env's own action, observation and state models, and the real error answers.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode, models_json_schema

from openenv.core.wire import SESSION_HEADER, HTTPError
from openenv.server.security import PUBLIC_ROUTES
from openenv.server.sessions import EnvTypes

__all__ = ["document_env"]

_REF = "#/components/schemas/{model}"
# The errors each route can answer (see openenv.errors for the codes behind each status).
_ERRORS: dict[tuple[str, str], dict[int, str]] = {
    ("/reset", "post"): {
        400: "bad request or reset options",
        401: "the named session is not live",
        404: "the env has no such thing (an unknown task id, ...)",
        500: "the environment failed",
        503: "the server is at capacity",
    },
    ("/step", "post"): {
        400: "bad body or invalid action",
        401: "no live session named",
        404: "the env has no such thing",
        500: "the environment failed",
    },
    ("/state", "get"): {401: "no live session named", 500: "the environment failed"},
    ("/session", "delete"): {401: "no live session named"},
}


_GUARD_ERRORS = {
    401: "no or a wrong bearer token",
    403: "a foreign Origin or Host (a web page, DNS rebinding)",
    413: "the body is over the server's size cap",
    415: "the body is not application/json",
}


def document_env(app: FastAPI, types: EnvTypes) -> None:
    """Replace `app.openapi` with a builder that documents `types` and the real error answers."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(title=app.title, version=app.version, routes=app.routes)
            _add_env_models(schema, types)
            _add_errors(schema)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]  # FastAPI's documented way to replace the OpenAPI builder


def _add_env_models(schema: dict[str, Any], types: EnvTypes) -> None:
    """Point the action, observation and state at the env's own models (lifted into components)."""
    pairs: list[tuple[type[BaseModel], JsonSchemaMode]] = [
        (types.action, "validation"),
        (types.observation, "serialization"),
        (types.state, "serialization"),
        (HTTPError, "serialization"),
    ]
    refs, defs = models_json_schema(pairs, ref_template=_REF)
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    for name, model_schema in defs.get("$defs", {}).items():
        components.setdefault(name, model_schema)
    action, observation, state = (refs[pair] for pair in pairs[:3])
    paths = schema.get("paths", {})
    step = paths.get("/step", {}).get("post")
    if step is not None:
        body = step["requestBody"]["content"]["application/json"]["schema"]
        body["properties"]["action"] = action
        step.setdefault("parameters", []).append(_session_header())
    reply = components.get("SessionReply")
    if reply is not None:
        reply["properties"]["observation"] = _nested_fields(components, observation)
    get_state = paths.get("/state", {}).get("get")
    if get_state is not None:
        get_state["responses"]["200"]["content"]["application/json"]["schema"] = state


def _nested_fields(components: dict[str, Any], observation: dict[str, Any]) -> dict[str, Any]:
    """The observation as a reply nests it: its fields without `reward` and `done`, which travel beside
    it (the reference's shape, `openenv.core.wire.observation_json`); a component of its own."""
    name = observation["$ref"].rsplit("/", 1)[-1]
    fields = {k: v for k, v in components[name].items() if k not in ("properties", "required")}
    fields["properties"] = {
        k: v for k, v in components[name].get("properties", {}).items() if k not in ("reward", "done")
    }
    fields["required"] = [k for k in components[name].get("required", []) if k not in ("reward", "done")]
    fields["title"] = f"{name}Fields"
    components[f"{name}Fields"] = fields
    return {"$ref": _REF.format(model=f"{name}Fields")}


def _add_errors(schema: dict[str, Any]) -> None:
    """Drop FastAPI's 422 (never sent) and list each route's real error statuses with `HTTPError`."""
    error = {"content": {"application/json": {"schema": {"$ref": _REF.format(model="HTTPError")}}}}
    for path, methods in schema.get("paths", {}).items():
        for method, operation in methods.items():
            responses = operation.get("responses", {})
            responses.pop("422", None)
            for status, why in _ERRORS.get((path, method), {}).items():
                responses[str(status)] = {"description": why, **error}
            for status, why in _GUARD_ERRORS.items():  # SecurityMiddleware answers these on every route
                if status == 401 and (method.upper(), path) in PUBLIC_ROUTES:
                    continue
                if status in (413, 415) and method not in ("post", "put", "patch"):
                    continue
                responses.setdefault(str(status), {"description": why, **error})
            if (method.upper(), path) in PUBLIC_ROUTES:
                operation["security"] = []  # no token needed
    schema.setdefault("components", {}).setdefault("securitySchemes", {})["bearer"] = {
        "type": "http",
        "scheme": "bearer",
        "description": "the token the server printed when it started (docs/security.md)",
    }
    schema["security"] = [{"bearer": []}]
    components = schema.get("components", {}).get("schemas", {})
    for unused in ("HTTPValidationError", "ValidationError"):
        components.pop(unused, None)


def _session_header() -> dict[str, Any]:
    return {
        "name": SESSION_HEADER,
        "in": "header",
        "required": False,
        "description": "the session id POST /reset answered (or send `session_id` in the body)",
        "schema": {"type": "string"},
    }
