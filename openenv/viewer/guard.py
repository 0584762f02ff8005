"""Who may read the viewer: the env server's own checks (token, Host, Origin), with a browser's way in.

The viewer shows trajectories, which hold a whole episode (prompts, tool output, the workspace's code):
the red-team read a `0600` trajectory through an unguarded `openenv view` as another local user, and
`Host: evil.example` was answered (DNS rebinding). So every request goes through
`openenv.server.security.SecurityMiddleware`, as the env server's do. A browser cannot send an
`Authorization` header on a navigation, so the printed URL carries the token once as `?token=`; a right
one is turned into that header for the check and kept in an `HttpOnly`, `SameSite=Strict` cookie, which
a foreign page's requests never carry.
"""

from __future__ import annotations

import secrets
from http.cookies import SimpleCookie
from urllib.parse import parse_qsl

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from openenv.server.security import SecurityMiddleware, ServerSecurity

__all__ = ["COOKIE", "ViewerGuard"]

COOKIE = "openenv_viewer"


class ViewerGuard(SecurityMiddleware):
    """`SecurityMiddleware` that also takes the token from `?token=` (then set as a cookie) or the cookie."""

    def __init__(self, app: ASGIApp, security: ServerSecurity) -> None:
        super().__init__(app, security)
        self._token = security.token.encode() if security.token else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self._token is not None:
            from_query, given = self._browser_token(scope)
            if given is not None and secrets.compare_digest(given, self._token):
                headers = [(k, v) for k, v in scope.get("headers", ()) if k != b"authorization"]
                scope = {**scope, "headers": [*headers, (b"authorization", b"Bearer " + given)]}
                if from_query:
                    send = self._setting_cookie(send)
        await super().__call__(scope, receive, send)

    @staticmethod
    def _browser_token(scope: Scope) -> tuple[bool, bytes | None]:
        for key, value in parse_qsl(scope.get("query_string", b"").decode("latin-1")):
            if key == "token":
                return True, value.encode("latin-1")
        for name, value in scope.get("headers", ()):
            if name == b"cookie":
                morsel = SimpleCookie(value.decode("latin-1")).get(COOKIE)
                if morsel is not None:
                    return False, morsel.value.encode("latin-1")
        return False, None

    def _setting_cookie(self, send: Send) -> Send:
        assert self._token is not None
        cookie = f"{COOKIE}={self._token.decode()}; HttpOnly; SameSite=Strict; Path=/".encode()

        async def wrapped(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), (b"set-cookie", cookie)]}
            await send(message)

        return wrapped
