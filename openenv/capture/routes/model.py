"""The harness-facing model routes: every registered dialect route, under `/s/{token}` and at the root.

Each route parses with its dialect, hands the canonical request to the session and renders the reply
with the same dialect. Errors go to the app's one handler, which renders them with the dialect stored
on the request; an error that is not an `OpenEnvError` (a bug, a `RecursionError` from a hostile body)
becomes a generic one with an error id here, so its text never reaches the client and the connection
stays open.

No client can stall the others: a body is capped in bytes before it is read (413), a big body is parsed,
rendered and tokenized on a worker thread rather than the event loop, and a client that disconnects
while its turn is generating cancels the turn (the engine request is aborted with it).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import secrets
from collections.abc import Awaitable, Callable
from typing import Any

import xxhash
from fastapi import APIRouter, Request, Response
from fastapi.responses import StreamingResponse

from openenv.capture.canonical import CanonicalRequest, Completion
from openenv.capture.dialects import ROUTES, Dialect, Endpoint, RequestContext
from openenv.capture.dialects.base import CountsTokens, ListsModels
from openenv.capture.dialects.state import DialectState
from openenv.capture.registry import CaptureSessionRegistry
from openenv.capture.session import CaptureSession
from openenv.capture.streaming import opens_reasoning, stream_reply
from openenv.capture.timing import RequestTimer, waiting
from openenv.errors import BadRequest, EnvError, NotFound, OpenEnvError

__all__ = [
    "MAX_BODY_BYTES",
    "OFFLOAD_BYTES",
    "BodyReadTimeout",
    "BodyTooLarge",
    "InternalError",
    "internal_error",
    "router",
]

router = APIRouter()
log = logging.getLogger("openenv.capture")

JSON = "application/json"
# Headers the official SDKs set on automatic retries (openai, anthropic: Stainless-generated).
RETRY_HEADERS = ("x-stainless-retry-count",)
MAX_BODY_BYTES = 32 * 1024 * 1024  # a 131k-token conversation is ~1 MB of JSON; images can add a few MB
OFFLOAD_BYTES = 256 * 1024  # bodies above this are parsed and rendered on a worker thread (~10+ ms of work)
# How long a disconnected request's generation waits for a resent copy to join it. It must outlast the
# official SDKs' first retry delay (openai and anthropic: up to 0.5 s; google-genai: 1 s plus up to 1 s of
# jitter), or a timed-out request's retry misses the join and samples the turn a second time.
REJOIN_GRACE_S = 3.0
# A body must arrive within this long of its headers: a client that sends half a body and waits held the
# request (and its slot) open forever (issue 30, finding 10). A 40 MB body over loopback takes well under 1 s.
BODY_READ_TIMEOUT_S = 60.0


class BodyReadTimeout(BadRequest):
    """Raised when a request body does not arrive within `BODY_READ_TIMEOUT_S` (408 in the caller's dialect)."""

    status_code = 408
    code = "request_timeout"


class BodyTooLarge(BadRequest):
    """Raised when a request body is over the proxy's byte cap (413 in the caller's dialect)."""

    status_code = 413
    code = "request_too_large"


class InternalError(EnvError):
    """An unexpected failure, told to the client only by its id (the proxy's log has the details)."""

    code = "internal_error"


def internal_error(exc: BaseException) -> InternalError:
    """A generic error with a fresh id for `exc`, logged with its traceback under that id."""
    eid = secrets.token_hex(6)
    log.error("internal error %s: %s", eid, type(exc).__name__, exc_info=not isinstance(exc, RecursionError))
    return InternalError(f"internal error (id {eid}); the proxy's log has the details", error_id=eid)


def _context(request: Request) -> RequestContext:
    params = {k: v for k, v in request.path_params.items() if k != "token"}
    return RequestContext(
        path_params=params,
        query=dict(request.query_params),
        headers={k.lower(): v for k, v in request.headers.items()},
    )


async def _read_body(request: Request, cap: int) -> bytes:
    """The body, refused (413) once it passes `cap` bytes: by its Content-Length before a byte is read,
    else while it streams in."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > cap:
        raise BodyTooLarge(f"the request body is {int(declared)} bytes; this proxy accepts at most {cap}")
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(BODY_READ_TIMEOUT_S):
            async for chunk in request.stream():
                size += len(chunk)
                if size > cap:
                    raise BodyTooLarge(f"the request body is over {cap} bytes, the most this proxy accepts")
                chunks.append(chunk)
    except TimeoutError:
        raise BodyReadTimeout(
            f"the request body did not arrive within {BODY_READ_TIMEOUT_S:g} s "
            f"({size} bytes came); send it whole"
        ) from None
    return b"".join(chunks) if len(chunks) != 1 else chunks[0]


def _parse(
    dialect: Dialect[Any], body: bytes, ctx: RequestContext, state: DialectState
) -> tuple[Any, CanonicalRequest]:
    req = dialect.parse(body, ctx, state)
    return req, dialect.to_canonical(req, state)


class _Disconnect:
    """Cancels the request's task when its client disconnects (after the body was read), unless within
    `REJOIN_GRACE_S` the same bytes came again and are waiting on this answer: google-genai and codex
    resend a timed-out request unmarked, and that copy should get this generation, not start another.

    The watcher is cancelled after every answered request, and it ends by returning, not by raising:
    a task that ends cancelled keeps its `CancelledError`, whose traceback holds the watcher's frames,
    which hold this object and so the task: a cycle that kept each request's objects (the ASGI cycle,
    its transport, the `Request`, ~50 objects) alive until a full collection. At 1,000 sessions those
    collections freed ~35k such objects every few seconds, 0.1-0.2 s pauses of the whole proxy."""

    __slots__ = ("gone", "watcher")

    def __init__(self, request: Request, session: CaptureSession, digest: str | None) -> None:
        self.gone = False
        task = asyncio.current_task()
        assert task is not None
        self.watcher = asyncio.get_running_loop().create_task(self._watch(request, task, session, digest))

    async def _watch(
        self, request: Request, task: asyncio.Task[Any], session: CaptureSession, digest: str | None
    ) -> None:
        try:
            while (await request.receive())["type"] != "http.disconnect":
                pass
            await asyncio.sleep(REJOIN_GRACE_S)
        except asyncio.CancelledError:
            return  # stopped: the request was answered (see the class doc for why not re-raise)
        if not session.shared(digest):
            self.gone = True
            task.cancel()

    def stop(self) -> None:
        self.watcher.cancel()


async def _answer(
    session: CaptureSession,
    canonical: CanonicalRequest,
    dialect: Dialect[Any],
    request: Request,
    **kwargs: Any,
) -> Completion | None:
    """`session.handle`, cancelled if the client goes away first (None then: nobody is left to answer)."""
    watch = _Disconnect(request, session, kwargs.get("digest"))
    try:
        return await session.handle(canonical, dialect.name, **kwargs)
    except asyncio.CancelledError:
        if not watch.gone:
            raise  # the server is shutting down
        task = asyncio.current_task()
        if task is not None:
            task.uncancel()
        return None
    finally:
        watch.stop()


def _handler(endpoint: Endpoint) -> Callable[[Request], Awaitable[Response]]:
    dialect = endpoint.dialect

    async def serve(request: Request) -> Response:
        request.state.dialect = dialect
        timer = RequestTimer()
        try:
            with timer.opened():
                response = await _serve(request)
            if not isinstance(response, StreamingResponse):  # a stream's headers left before the engine ended
                response.headers["server-timing"] = timer.header()
            return response
        except OpenEnvError:
            raise
        except Exception as exc:
            raise internal_error(exc) from None

    async def _serve(request: Request) -> Response:
        ctx = _context(request)
        registry: CaptureSessionRegistry = request.app.state.sessions
        token = request.path_params.get("token") or dialect.session_token(ctx)
        session = registry.get(token)
        if endpoint.operation == "models":
            if not isinstance(dialect, ListsModels):
                raise NotFound(f"{dialect.name} does not list models")
            body = dialect.models_body([registry.served_model], ctx)
            return Response(body.model_dump_json(), media_type=JSON)
        with waiting("body"):
            body = await _read_body(request, request.app.state.max_body_bytes)
        big = len(body) > OFFLOAD_BYTES  # parse + render + tokenize off the loop: others keep being served
        state = registry.dialect_state
        req, canonical = (
            await asyncio.to_thread(_parse, dialect, body, ctx, state)
            if big
            else _parse(dialect, body, ctx, state)
        )
        if endpoint.operation == "count_tokens":
            if not isinstance(dialect, CountsTokens):
                raise NotFound(f"{dialect.name} does not count tokens")
            count = session.count_tokens
            n = (
                await asyncio.to_thread(count, canonical, dialect.name)
                if big
                else count(canonical, dialect.name)
            )
            return Response(dialect.count_tokens_body(n, req).model_dump_json(), media_type=JSON)
        retry = any(ctx.headers.get(h, "0") not in ("", "0") for h in RETRY_HEADERS)
        # 128-bit xxh3: a retry is matched within one session, so collisions need only be improbable, not
        # infeasible; blake2b took 236 us on a 60-turn (135 kB) body, xxh3 5 us.
        digest = xxhash.xxh3_128_hexdigest(body)
        if canonical.stream:  # tokens go out as the engine samples them, with keep-alives (streaming.py)
            handle = functools.partial(
                _answer, session, canonical, dialect, request, digest=digest, retry=retry, offload=big
            )
            _, events = await stream_reply(
                dialect,
                req,
                handle,
                decode=registry.renderer.decode,
                model=canonical.model or registry.served_model,
                parser=registry.parser.name,
                thinking=opens_reasoning(registry.renderer),
                eos_ids=registry.renderer.eos_ids,
                pieces=session.streamed_pieces,
                key=digest,
            )
            return StreamingResponse(
                events, media_type="text/event-stream", headers={"cache-control": "no-cache"}
            )
        done = await _answer(session, canonical, dialect, request, digest=digest, retry=retry, offload=big)
        if done is None:
            return Response(status_code=499)  # the client is gone; this is never delivered
        return Response(dialect.from_canonical(done, req).model_dump_json(), media_type=JSON)

    serve.__name__ = f"{dialect.name}_{endpoint.operation}"
    return serve


for _key, _endpoint in ROUTES.items():
    _method, _path = _key.split(" ", 1)
    _serve = _handler(_endpoint)
    # Plain Starlette routes: FastAPI solves an endpoint's parameters on every request even when it takes
    # only the `Request`, a sixth of the proxy's CPU per turn; these routes are not in the OpenAPI anyway.
    router.add_route("/s/{token}" + _path, _serve, methods=[_method], include_in_schema=False)
    router.add_route(_path, _serve, methods=[_method], include_in_schema=False)
