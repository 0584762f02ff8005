"""Who may talk to an env server: the bearer token, the Host/Origin checks, JSON-only bodies and size caps.

Threat model (docs/security.md): the user who starts the server is trusted; network clients and web
pages are not. A page open in the user's browser can reach a server on localhost two ways, and each
check here closes one:

- a cross-site request (a form or `fetch` POST with `text/plain`, a WebSocket): refused by the token
  (a page cannot know it), by the `Origin` check (a foreign origin is refused even with no token), and
  by the `Content-Type` check (a body must be `application/json`, which a page cannot send cross-site
  without a CORS preflight that we never answer);
- DNS rebinding (`evil.example` re-pointed at 127.0.0.1, so the page is "same-origin"): refused by the
  `Host` check (the server answers only to the names it was told).

Everything is checked once, in one pure-ASGI middleware in front of every route (HTTP, `/ws`, `/mcp`),
before FastAPI parses anything; a refused request never reaches an env.
"""

from __future__ import annotations

import ipaddress
import json
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from openenv.core.auth import TOKEN_ENV, generate_token, is_loopback_host
from openenv.errors import (
    BadRequest,
    Forbidden,
    OpenEnvError,
    PayloadTooLarge,
    Unauthorized,
    UnsupportedMediaType,
)
from openenv.settings import flag

__all__ = [
    "DEFAULT_MAX_BODY_BYTES",
    "LOOPBACK_HOSTS",
    "PUBLIC_ROUTES",
    "SecurityMiddleware",
    "ServerSecurity",
    "all_hosts",
    "error_json",
]

DEFAULT_MAX_BODY_BYTES = 16 * 2**20
LOOPBACK_HOSTS: tuple[str, ...] = ("127.0.0.1", "localhost", "::1")
# Routes that need no token: the liveness probe and the API's own documentation (no data, no actions).
PUBLIC_ROUTES = frozenset(
    {
        ("GET", "/health"),
        ("HEAD", "/health"),
        ("GET", "/openapi.json"),
        ("GET", "/docs"),
        ("GET", "/docs/oauth2-redirect"),
        ("GET", "/redoc"),
    }
)
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


@dataclass(frozen=True)
class ServerSecurity:
    """How an env server guards itself; the defaults are the safe ones.

    Args:
        token: the bearer token every request but `GET /health` and the docs must carry; a fresh random one by default.
            None turns the token off, and then only loopback peers are served (the explicit opt-out
            `openenv serve --no-token` is for a server bound to loopback).
        allowed_hosts: the names the server answers to in `Host` (port ignored); `*` answers to any
            name (behind a proxy that checks it, with a token). Default: the loopback names.
        allowed_origins: web origins (`https://app.example`) whose pages may call the server, besides
            the server's own origin. A request with any other `Origin` is refused; one with none (a
            program, not a page) is not.
        max_body_bytes: the largest HTTP request body (413 above it).
        max_frame_bytes: the largest WebSocket frame (the connection is closed with 1009 above it).
        allow_inline_tasks: let `reset` carry whole task definitions (their commands run in the
            sandbox) instead of ids of the server's own tasks; for trusted clients only.
    """

    token: str | None = field(default_factory=generate_token, repr=False)
    allowed_hosts: tuple[str, ...] = LOOPBACK_HOSTS
    allowed_origins: tuple[str, ...] = ()
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    max_frame_bytes: int = DEFAULT_MAX_BODY_BYTES
    allow_inline_tasks: bool = False
    # Routes served without the token (method, path); the Harbor server adds its Task API when the
    # operator opens discovery (openenv/harbor_server/app.py).
    public_routes: frozenset[tuple[str, str]] = PUBLIC_ROUTES

    @classmethod
    def for_bind(
        cls,
        host: str,
        *,
        token: str | None = None,
        no_token: bool = False,
        allowed_hosts: Iterable[str] = (),
        allowed_origins: Iterable[str] = (),
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        allow_inline_tasks: bool = False,
    ) -> ServerSecurity:
        """The settings of a server that binds `host` (what `openenv serve` and `server/app.py` build).

        Raises:
            BadRequest: `no_token` on an address other than loopback (anyone who can reach the port
                could then drive the server), or a token together with `no_token`.
        """
        if no_token and token:
            raise BadRequest("give a token or --no-token, not both")
        if no_token and not is_loopback_host(host):
            raise BadRequest(
                f"--no-token is allowed only on a loopback address (127.0.0.1, ::1), not {host!r}: "
                "anyone who can reach the port could run tasks on this machine"
            )
        return cls(
            token=None if no_token else (token or generate_token()),
            allowed_hosts=all_hosts([*allowed_hosts, *([] if _is_wildcard_bind(host) else [host])]),
            allowed_origins=tuple(allowed_origins),
            max_body_bytes=max_body_bytes,
            max_frame_bytes=max_body_bytes,
            allow_inline_tasks=allow_inline_tasks,
        )

    @classmethod
    def from_environ(cls, host: str, environ: Mapping[str, str]) -> ServerSecurity:
        """`for_bind` from `OPENENV_TOKEN`, `OPENENV_NO_TOKEN=1`, `OPENENV_ALLOWED_HOSTS` and
        `OPENENV_ALLOWED_ORIGINS` (comma-separated), `OPENENV_MAX_BODY_BYTES`, `OPENENV_ALLOW_INLINE_TASKS=1`
        (the deployment entry point's settings; a container or Space sets them)."""

        def listed(name: str) -> list[str]:
            return [v.strip() for v in environ.get(name, "").split(",") if v.strip()]

        return cls.for_bind(
            host,
            token=environ.get(TOKEN_ENV) or None,
            no_token=flag("OPENENV_NO_TOKEN", environ),
            allowed_hosts=listed("OPENENV_ALLOWED_HOSTS"),
            allowed_origins=listed("OPENENV_ALLOWED_ORIGINS"),
            max_body_bytes=int(environ.get("OPENENV_MAX_BODY_BYTES") or DEFAULT_MAX_BODY_BYTES),
            allow_inline_tasks=flag("OPENENV_ALLOW_INLINE_TASKS", environ),
        )

    def host_allowed(self, host_header: str | None) -> bool:
        """A name in `allowed_hosts`, or any IP address: DNS rebinding needs a *name* the attacker controls
        (a page's request carries an IP literal only when the page itself came from that address), so IP
        literals are safe, and a server reached at 127.0.0.2 or through a container's port still answers."""
        if "*" in self.allowed_hosts:
            return True
        name = _hostname(host_header or "")
        if name is None:
            return False
        if name in {h.lower().strip("[]") for h in self.allowed_hosts}:
            return True
        try:
            ipaddress.ip_address(name)
        except ValueError:
            return False
        return True

    def origin_allowed(self, origin: str | None, host_header: str | None, scheme: str) -> bool:
        """No `Origin` (not a browser), the server's own origin, or one listed in `allowed_origins`."""
        if origin is None:
            return True
        origin = origin.rstrip("/").lower()
        if origin in {o.rstrip("/").lower() for o in self.allowed_origins} or "*" in self.allowed_origins:
            return True
        own = "https" if scheme in ("https", "wss") else "http"
        return host_header is not None and origin == f"{own}://{host_header.lower()}"

    def mcp_transport_security(self) -> Any:
        """The same Host/Origin rules for the MCP SDK's own DNS-rebinding check (defence in depth)."""
        from mcp.server.transport_security import TransportSecuritySettings

        if "*" in self.allowed_hosts:
            return TransportSecuritySettings(enable_dns_rebinding_protection=False)
        hosts = [h if ":" not in h or h.startswith("[") else f"[{h}]" for h in self.allowed_hosts]
        return TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=[*hosts, *(f"{h}:*" for h in hosts)],
            allowed_origins=[
                *self.allowed_origins,
                *(f"{s}://{h}:*" for h in hosts for s in ("http", "https")),
            ],
        )


def _is_wildcard_bind(host: str) -> bool:
    return host in ("0.0.0.0", "::", "")


def _hostname(host_header: str) -> str | None:
    """`example.com:8000` -> `example.com`; `[::1]:8000` -> `::1`; None when malformed."""
    host = host_header.strip().lower()
    if not host:
        return None
    if host.startswith("["):
        end = host.find("]")
        return host[1:end] if end > 0 else None
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _peer_is_loopback(scope: Scope) -> bool:
    client = scope.get("client")
    if not client:
        return False
    try:
        return ipaddress.ip_address(client[0]).is_loopback
    except ValueError:
        return is_loopback_host(str(client[0]))


class SecurityMiddleware:
    """Checks every HTTP request and WebSocket handshake before the app sees it (see the module doc).

    On the step hot path it costs one pass over the headers and a few set lookups (a Host header's
    verdict is remembered), measured by bench/bench_server_guard.py.
    """

    def __init__(self, app: ASGIApp, security: ServerSecurity) -> None:
        self.app = app
        self.security = security
        self._expected = f"Bearer {security.token}".encode() if security.token else None
        self._host_verdicts: dict[bytes, bool] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers, hosts = _wanted_headers(scope)
        try:
            self._check(scope, headers, hosts)
        except OpenEnvError as err:
            await _refuse(scope, receive, send, err)
            return
        if kind == "http" and scope["method"] in _BODY_METHODS and b"content-length" not in headers:
            try:  # chunked: read it here, up to the cap (with a Content-Length the size was checked above)
                receive = await _buffered(receive, self.security.max_body_bytes)
            except PayloadTooLarge as err:
                await _refuse(scope, receive, send, err)
                return
        await self.app(scope, receive, send)

    def _host_ok(self, raw: bytes | None) -> bool:
        if raw is None:
            return self.security.host_allowed(None)
        verdict = self._host_verdicts.get(raw)
        if verdict is None:
            verdict = self.security.host_allowed(_text(raw))
            if len(self._host_verdicts) < 256:  # bounded: a client may send any number of names
                self._host_verdicts[raw] = verdict
        return verdict

    def _check(self, scope: Scope, headers: dict[bytes, bytes], hosts: int) -> None:
        sec = self.security
        if hosts > 1:
            raise Forbidden("more than one Host header; refusing to guess which one the client meant")
        raw_host = headers.get(b"host")
        if not self._host_ok(raw_host):
            raise Forbidden(
                f"this server does not answer to Host {_text(raw_host)!r} (DNS rebinding?); start "
                "it with --allowed-host NAME to serve that name",
                host=_text(raw_host),
            )
        origin = headers.get(b"origin")
        if origin is not None and not sec.origin_allowed(
            _text(origin), _text(raw_host), scope.get("scheme", "http")
        ):
            raise Forbidden(
                f"requests from web pages of {_text(origin)!r} are refused; start the server with "
                "--allowed-origin ORIGIN to allow them",
                origin=_text(origin),
            )
        method = scope.get("method", "GET")
        if (method, scope["path"]) not in sec.public_routes:
            self._check_token(scope, headers)
        if scope["type"] == "http" and method in _BODY_METHODS:
            _check_body_headers(headers, sec.max_body_bytes)

    def _check_token(self, scope: Scope, headers: dict[bytes, bytes]) -> None:
        if self._expected is None:
            if not _peer_is_loopback(scope):
                raise Unauthorized("this server runs without a token and serves loopback clients only")
            return
        given = headers.get(b"authorization", b"")
        if not secrets.compare_digest(given, self._expected):
            why = "no Authorization header" if not given else "a wrong token"
            raise Unauthorized(
                f"{why}: send 'Authorization: Bearer <token>' with the token the server printed "
                "when it started (clients read $OPENENV_TOKEN)"
            )


_WANTED = frozenset(
    {b"host", b"origin", b"authorization", b"content-type", b"content-length", b"transfer-encoding"}
)


def _wanted_headers(scope: Scope) -> tuple[dict[bytes, bytes], int]:
    """The headers the checks read (names are lower-case in ASGI; the first value wins), and how many
    Host headers there were."""
    out: dict[bytes, bytes] = {}
    hosts = 0
    for name, value in scope.get("headers", ()):
        if name in _WANTED:
            if name == b"host":
                hosts += 1
            out.setdefault(name, value)
    return out, hosts


async def _buffered(receive: Receive, limit: int) -> Receive:
    """Read a body sent without Content-Length, stopping at `limit`; replay it to the app."""
    chunks: list[bytes] = []
    seen, more = 0, True
    while more:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunk = message.get("body", b"")
        seen += len(chunk)
        if seen > limit:
            raise PayloadTooLarge(
                f"the request body is over {limit} bytes; this server accepts at most {limit}", limit=limit
            )
        chunks.append(chunk)
        more = message.get("more_body", False)
    replay: list[Message] = [{"type": "http.request", "body": b"".join(chunks), "more_body": False}]

    async def replayed() -> Message:
        return replay.pop() if replay else await receive()

    return replayed


def _check_body_headers(headers: dict[bytes, bytes], limit: int) -> None:
    length = headers.get(b"content-length")
    has_body = headers.get(b"transfer-encoding") is not None or (
        length is not None and length.strip() != b"0"
    )
    if length is not None:
        try:
            size = int(length)
        except ValueError:
            size = limit + 1
        if size > limit:
            raise PayloadTooLarge(
                f"the request body is {size} bytes; this server accepts at most {limit}", limit=limit
            )
    if has_body:
        ctype = _text(headers.get(b"content-type")) or ""
        media = ctype.split(";", 1)[0].strip().lower()
        if media != "application/json" and not media.endswith("+json"):
            raise UnsupportedMediaType(
                f"request bodies must be application/json, got {ctype or 'no Content-Type'!r}",
                content_type=ctype,
            )


def _text(raw: bytes | None) -> str | None:
    return raw.decode("latin-1") if raw is not None else None


def error_json(err: OpenEnvError) -> bytes:
    return json.dumps(
        {"error": {"code": err.code, "message": err.message, "details": _plain(err.details)}}
    ).encode()


def _plain(details: dict[str, Any]) -> dict[str, Any]:
    return {
        k: v if isinstance(v, str | int | float | bool | type(None)) else repr(v) for k, v in details.items()
    }


async def _refuse(scope: Scope, receive: Receive, send: Send, err: OpenEnvError) -> None:
    """Answer `err` as HTTP; on a WebSocket handshake, as an HTTP denial response when the server
    supports it (uvicorn does), else by closing before accept (the client sees 403)."""
    body = error_json(err)
    headers: list[tuple[bytes, bytes]] = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
    ]
    if err.status_code == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    if scope["type"] == "http":
        await send({"type": "http.response.start", "status": err.status_code, "headers": headers})
        await send({"type": "http.response.body", "body": body})
        return
    if "websocket.http.response" in scope.get("extensions", {}):
        await send({"type": "websocket.http.response.start", "status": err.status_code, "headers": headers})
        await send({"type": "websocket.http.response.body", "body": body})
    else:
        await send({"type": "websocket.close", "code": 1008, "reason": err.code})


def all_hosts(hosts: Iterable[str]) -> tuple[str, ...]:
    """`LOOPBACK_HOSTS` plus `hosts`, without repeats (what `openenv serve --allowed-host` builds)."""
    return tuple(dict.fromkeys([*LOOPBACK_HOSTS, *hosts]))
