"""An in-process stand-in for the proxy app, so dialect tests can use the official SDKs.

`sdk_http` is an httpx2 client (the transport the official SDKs are built on) whose
`MockTransport` resolves the route in the real registry, checks the session token with the
dialect's `session_token`, and answers a fixed `Completion` with the dialect's pure functions. The
real app and vLLM are exercised elsewhere; here a failure is the dialect's.
"""

from __future__ import annotations

import inspect
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx2
import pytest
from starlette.routing import compile_path

from openenv.capture.canonical import Completion, ToolCallPart, Usage
from openenv.capture.dialects import ROUTES, Endpoint, RequestContext
from openenv.capture.dialects.state import DialectState
from openenv.errors import OpenEnvError, UnknownSession

STATE = DialectState()  # what the dialects remember between requests (one per proxy)

TOKEN = "tok"

DONE = Completion(
    id="turn7",
    model="tiny",
    created=1_790_000_000,
    reasoning="The user wants a.txt.",
    text="Reading it.",
    tool_calls=(ToolCallPart(id="call_2", name="bash", arguments='{"command": "cat a.txt"}'),),
    token_ids=(1, 2, 3),
    logprobs=(-0.1, -0.2, -0.3),
    finish_reason="tool_calls",
    usage=Usage(prompt_tokens=42, completion_tokens=3),
)


def route(method: str, path: str) -> tuple[Endpoint, dict[str, str]]:
    """The registry entry serving `method path`, and its path parameters."""
    for key, endpoint in ROUTES.items():
        verb, template = key.split(" ", 1)
        match = compile_path(template)[0].match(path)
        if verb == method and match:
            return endpoint, match.groupdict()
    raise LookupError(f"no route for {method} {path}")


def respond(request: httpx2.Request, done: Completion) -> httpx2.Response:
    endpoint, params = route(request.method, request.url.path)
    dialect = endpoint.dialect
    ctx = RequestContext(
        path_params=params,
        query=dict(request.url.params),
        headers={k.lower(): v for k, v in request.headers.items()},
    )
    try:
        if dialect.session_token(ctx) != TOKEN:
            raise UnknownSession("unknown session token; use the key the session was opened with")
        req = dialect.parse(request.content, ctx, STATE)
        canonical = dialect.to_canonical(req, STATE)
    except OpenEnvError as err:
        status, body = dialect.error_body(err)
        return httpx2.Response(
            status, content=body.model_dump_json(), headers={"content-type": "application/json"}
        )
    if endpoint.operation == "count_tokens":
        body = dialect.count_tokens_body(len(canonical.messages), req)  # type: ignore[attr-defined]
        return httpx2.Response(
            200, content=body.model_dump_json(), headers={"content-type": "application/json"}
        )
    if canonical.stream:
        sse = b"".join(event.encode() for event in dialect.sse_events(done, req))
        return httpx2.Response(200, content=sse, headers={"content-type": "text/event-stream"})
    reply = dialect.from_canonical(done, req).model_dump_json()  # as the app writes it
    return httpx2.Response(200, content=reply, headers={"content-type": "application/json"})


@pytest.fixture
def done() -> Completion:
    """The completion every stand-in request is answered with: reasoning, text and one tool call."""
    return DONE


@pytest.fixture
def sdk_http(done: Completion) -> httpx2.Client:
    """An httpx2 client for an official SDK, answered by the stand-in (session token `tok`)."""
    return httpx2.Client(transport=httpx2.MockTransport(lambda request: respond(request, done)))


@pytest.fixture
def dialect_for() -> Callable[[str], Any]:
    """`dialect_for(path)`: the dialect the registry routes POST `path` to."""
    return lambda path: route("POST", path.split("?")[0])[0].dialect


@pytest.fixture
def parse_as() -> Callable[[str, dict[str, Any]], Any]:
    """`parse_as(path, body)`: the wire request the registry's dialect for POST `path` makes of `body`."""

    def parse(path: str, body: dict[str, Any]) -> Any:
        endpoint, params = route("POST", path.split("?")[0])
        return endpoint.dialect.parse(json.dumps(body).encode(), RequestContext(path_params=params), STATE)

    return parse


FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.fixture
def harness_request() -> Callable[[str], dict[str, Any]]:
    """`harness_request("anthropic/claude_code")`: a recorded request (`method`, `path`, `headers`,
    `body`) from tests/capture/fixtures/."""
    return lambda name: json.loads((FIXTURES / f"{name}.json").read_text())


@pytest.fixture
def golden() -> Callable[[str, str], None]:
    """`golden("anthropic/tool_use.sse", text)`: `text` must equal the stored transcript byte for byte.
    Set OPENENV_UPDATE_GOLDEN=1 to rewrite the file after an intended change (then review the diff)."""

    def check(name: str, text: str) -> None:
        path = FIXTURES / name
        if os.environ.get("OPENENV_UPDATE_GOLDEN") == "1":
            path.write_text(text)
        assert path.exists(), f"no golden file {path}; run with OPENENV_UPDATE_GOLDEN=1 to create it"
        assert text == path.read_text()

    return check


def split_known(method: Callable[..., Any], body: dict[str, Any]) -> dict[str, Any]:
    """`body` as keyword arguments for an SDK method: parameters it names go in directly, the rest
    (newer fields than the SDK knows) travel in `extra_body`, so the wire body stays the same."""
    known = set(inspect.signature(method).parameters)
    kwargs = {k: v for k, v in body.items() if k in known and k != "stream"}
    extra = {k: v for k, v in body.items() if k not in known and k != "stream"}
    return kwargs | ({"extra_body": extra} if extra else {})


@pytest.fixture
def sdk_kwargs() -> Callable[[Callable[..., Any], dict[str, Any]], dict[str, Any]]:
    """See `split_known`."""
    return split_known
