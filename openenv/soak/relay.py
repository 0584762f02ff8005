"""`LedgerRelay`: a loopback HTTP relay in front of the capture proxy that counts what harnesses send.

The soak needs a count of model requests that does not come from the proxy's own bookkeeping: "lost
turns" are requests that reached the proxy but are missing from its trajectory, and only an independent
ledger can see them. The relay also plays the client that retries: armed for a session, it sends that
session's next answered request again, byte for byte with `x-stainless-retry-count: 1`, before the
harness gets its reply, and checks that the proxy replays the same bytes instead of adding a turn.

Replies are read whole and passed on with a Content-Length: the proxy generates a turn before it starts
its SSE stream, so nothing is lost by buffering here.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Self

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from openenv.core.polling import settle
from openenv.server import LocalServer

__all__ = ["LedgerRelay", "SessionLedger"]

_DROP_REQUEST = {"host", "content-length", "connection", "transfer-encoding", "accept-encoding", "keep-alive"}
_DROP_REPLY = {"content-length", "connection", "transfer-encoding", "content-encoding", "keep-alive"}
RETRY_HEADER = "x-stainless-retry-count"


@dataclass
class SessionLedger:
    """What one session's harness sent through the relay, and what came back."""

    posts: int = 0  # model requests (POST) from the harness; the relay's own retries are not counted
    statuses: Counter[int] = field(default_factory=Counter)
    relay_error_reasons: list[str] = field(default_factory=list)  # why each undelivered request failed
    replays_sent: int = 0
    replays_identical: int = 0
    replay_problems: list[str] = field(default_factory=list)

    @property
    def in_flight(self) -> int:
        """Requests counted but not yet answered (every answer, a relay error's 502 too, has a status)."""
        return self.posts - sum(self.statuses.values())

    @property
    def relay_errors(self) -> int:
        """Requests the relay could not deliver to the proxy (answered 502)."""
        return len(self.relay_error_reasons)


class LedgerRelay:
    """Relays `127.0.0.1:<port>` to the capture proxy at `target_port`, keeping a `SessionLedger` per token.

    Args:
        target_port: the capture proxy's port on 127.0.0.1.
        replay_timeout_s: how long an injected retry may take; a retry that is parked as a new turn
            instead of replayed would otherwise wait forever for a controller.
    """

    def __init__(self, target_port: int, *, replay_timeout_s: float = 10.0) -> None:
        self.port = 0
        self._target = f"http://127.0.0.1:{target_port}"
        self._replay_timeout_s = replay_timeout_s
        self._ledgers: dict[str, SessionLedger] = {}
        self._armed: set[str] = set()
        self._lock = threading.Lock()
        self._client: httpx.AsyncClient | None = None
        self._server: LocalServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def ledger(self, token: str) -> SessionLedger:
        """The session's ledger so far (an empty one if it sent nothing)."""
        with self._lock:
            return self._ledgers.setdefault(token, SessionLedger())

    def settled_ledger(self, token: str, wait_s: float = 5.0) -> SessionLedger:
        """The ledger once every request it counted has its answer, or after `wait_s`. A harness killed
        mid-request leaves one on its way to the proxy; counted before its answer, it would look lost
        (a request that is never answered still is, after the wait)."""
        return settle(lambda: self.ledger(token), self._answered, wait_s)

    def _answered(self, ledger: SessionLedger) -> bool:
        with self._lock:  # the relay's thread adds statuses as answers come
            return ledger.in_flight <= 0

    def replay_next(self, token: str) -> None:
        """Send the session's next answered request again, as a client retry would."""
        with self._lock:
            self._armed.add(token)

    def disarm(self, token: str) -> bool:
        """Forget an armed retry that never fired; True if one was still armed."""
        with self._lock:
            was = token in self._armed
            self._armed.discard(token)
            return was

    # ---- lifecycle --------------------------------------------------------------------------------

    def start(self, timeout: float = 30.0) -> Self:
        app = Starlette(
            routes=[Route("/{path:path}", self._relay, methods=["GET", "POST", "PUT", "DELETE"])],
            lifespan=self._lifespan,
        )
        self._server = LocalServer(app).start(timeout)
        self.port = self._server.port
        return self

    @contextlib.asynccontextmanager
    async def _lifespan(self, app: Starlette) -> AsyncIterator[None]:
        # On the server's own loop. Idle connections expire well before the proxy's (uvicorn's 5 s keep-alive):
        # httpx's default expiry is also 5 s, so a pooled connection could be reused just as the proxy
        # closed it, and the relay would count a request the proxy never saw.
        limits = httpx.Limits(keepalive_expiry=2.0)
        self._client = httpx.AsyncClient(base_url=self._target, timeout=None, limits=limits)
        try:
            yield
        finally:
            await self._client.aclose()

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- one request ----------------------------------------------------------------------------------

    async def _relay(self, request: Request) -> Response:
        body = await request.body()
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _DROP_REQUEST}
        path = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        token = _token(request.url.path) if request.method == "POST" else None  # None: not counted
        if token is not None:
            with self._lock:
                self._ledgers.setdefault(token, SessionLedger()).posts += 1
        reply = await self._send(request.method, path, headers, body, token)
        if token is not None and reply.status_code < 400 and self._take_armed(token):
            await self._replay(token, path, headers, body, reply.content)
        return Response(
            reply.content,
            status_code=reply.status_code,
            headers={k: v for k, v in reply.headers.items() if k.lower() not in _DROP_REPLY},
        )

    async def _send(
        self, method: str, path: str, headers: dict[str, str], body: bytes, token: str | None
    ) -> httpx.Response:
        assert self._client is not None
        try:
            reply = await self._client.request(method, path, headers=headers, content=body)
        except httpx.HTTPError as exc:
            reply = httpx.Response(502, text=f"ledger relay: the proxy is unreachable: {exc}")
            if token is not None:
                with self._lock:
                    self._ledgers[token].relay_error_reasons.append(f"{type(exc).__name__}: {exc}"[:200])
        if token is not None:
            with self._lock:
                self._ledgers[token].statuses[reply.status_code] += 1
        return reply

    def _take_armed(self, token: str) -> bool:
        with self._lock:
            armed = token in self._armed
            self._armed.discard(token)
            return armed

    async def _replay(
        self, token: str, path: str, headers: dict[str, str], body: bytes, original: bytes
    ) -> None:
        """The same body again with the retry header; the proxy must answer with the same bytes."""
        assert self._client is not None
        problem = None
        try:
            again = await asyncio.wait_for(
                self._client.post(path, headers={**headers, RETRY_HEADER: "1"}, content=body),
                self._replay_timeout_s,
            )
            if again.status_code != 200:
                problem = f"the retry got HTTP {again.status_code}: {again.text[:200]}"
            elif again.content != original:
                problem = "the retry got different bytes than the original reply"
        except (TimeoutError, httpx.HTTPError) as exc:
            problem = f"the retry was not answered within {self._replay_timeout_s}s ({type(exc).__name__})"
        with self._lock:
            ledger = self._ledgers[token]
            ledger.replays_sent += 1
            if problem is None:
                ledger.replays_identical += 1
            else:
                ledger.replay_problems.append(problem)


def _token(path: str) -> str | None:
    """The session token of a `/s/<token>/...` path."""
    parts = path.split("/")
    return parts[2] if len(parts) > 2 and parts[1] == "s" and parts[2] else None
