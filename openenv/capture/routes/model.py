"""The harness-facing model routes: every registered dialect route, under `/s/{token}` and at the root.

Each route parses with its dialect, hands the canonical request to the session and renders the reply
with the same dialect. Routes never catch: errors go to the app's one handler, which renders them
with the dialect stored on the request.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator

import xxhash
from fastapi import APIRouter, Request, Response
from fastapi.responses import StreamingResponse

from openenv.capture.dialects import ROUTES, Endpoint, RequestContext, ServerSentEvent
from openenv.capture.dialects.base import CountsTokens, ListsModels
from openenv.capture.sessions import SessionManager
from openenv.errors import NotFound

__all__ = ["router"]

router = APIRouter()

JSON = "application/json"
# Headers the official SDKs set on automatic retries (openai, anthropic: Stainless-generated).
RETRY_HEADERS = ("x-stainless-retry-count",)


def _context(request: Request) -> RequestContext:
    params = {k: v for k, v in request.path_params.items() if k != "token"}
    return RequestContext(path_params=params, query=dict(request.query_params),
                          headers={k.lower(): v for k, v in request.headers.items()})


def _handler(endpoint: Endpoint) -> Callable[[Request], Awaitable[Response]]:
    dialect = endpoint.dialect

    async def serve(request: Request) -> Response:
        request.state.dialect = dialect
        ctx = _context(request)
        manager: SessionManager = request.app.state.sessions
        token = request.path_params.get("token") or dialect.session_token(ctx)
        session = manager.get(token)
        if endpoint.operation == "models":
            if not isinstance(dialect, ListsModels):
                raise NotFound(f"{dialect.name} does not list models")
            body = dialect.models_body([manager.served_model], ctx)
            return Response(body.model_dump_json(), media_type=JSON)
        body = await request.body()
        req = dialect.parse(body, ctx)
        canonical = dialect.to_canonical(req)
        if endpoint.operation == "count_tokens":
            if not isinstance(dialect, CountsTokens):
                raise NotFound(f"{dialect.name} does not count tokens")
            n = session.count_tokens(canonical, dialect.name)
            return Response(dialect.count_tokens_body(n, req).model_dump_json(), media_type=JSON)
        retry = any(ctx.headers.get(h, "0") not in ("", "0") for h in RETRY_HEADERS)
        # 128-bit xxh3: a retry is matched within one session, so collisions need only be improbable, not
        # infeasible; blake2b took 236 us on a 60-turn (135 kB) body, xxh3 5 us.
        digest = xxhash.xxh3_128_hexdigest(body)
        done = await session.handle(canonical, dialect.name, digest=digest, retry=retry)
        if canonical.stream:
            return StreamingResponse(_encode(dialect.sse_events(done, req)), media_type="text/event-stream",
                                     headers={"cache-control": "no-cache"})
        return Response(dialect.from_canonical(done, req).model_dump_json(), media_type=JSON)

    serve.__name__ = f"{dialect.name}_{endpoint.operation}"
    return serve


def _encode(events: Iterator[ServerSentEvent]) -> Iterator[bytes]:
    for event in events:
        yield event.encode()


for _key, _endpoint in ROUTES.items():
    _method, _path = _key.split(" ", 1)
    _serve = _handler(_endpoint)
    # Plain Starlette routes: FastAPI solves an endpoint's parameters on every request even when it takes
    # only the `Request`, a sixth of the proxy's CPU per turn; these routes are not in the OpenAPI anyway.
    router.add_route("/s/{token}" + _path, _serve, methods=[_method], include_in_schema=False)
    router.add_route(_path, _serve, methods=[_method], include_in_schema=False)
