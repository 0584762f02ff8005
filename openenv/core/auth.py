"""The env server's bearer token, and how a client on the same machine finds it without being told.

A server makes a fresh random token when it starts (or takes one from `--token` / `$OPENENV_TOKEN`) and
requires it in `Authorization: Bearer <token>` on everything but `GET /health` and the API docs. A web page cannot read
it, a network client is not given it; the user who started the server is, three ways, tried in order by
`token_for(url)`:

1. an in-process table filled by `LocalServer` (so `AutoEnv`, the Gymnasium adapter and tests that start
   a server in this process need nothing);
2. `$OPENENV_TOKEN` (a remote server, a Space, a container);
3. a token file the CLI's `openenv serve` writes for its port under the user's runtime folder, mode 0600
   (so a client in another terminal of the same user finds `openenv serve echo`'s token), only for
   loopback URLs.

This is Jupyter's model: the trust boundary is the user account, not the loopback interface.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import threading
from pathlib import Path
from urllib.parse import urlsplit

__all__ = [
    "AUTH_HEADER",
    "TOKEN_ENV",
    "auth_headers",
    "forget_token",
    "generate_token",
    "is_loopback_host",
    "remember_token",
    "remove_token_file",
    "token_file",
    "token_for",
    "write_token_file",
]

TOKEN_ENV = "OPENENV_TOKEN"
AUTH_HEADER = "authorization"
_LOOPBACK_NAMES = frozenset({"localhost", "::1", "[::1]", "ip6-localhost"})
_tokens: dict[tuple[str, int], str] = {}
_lock = threading.Lock()


def generate_token() -> str:
    """32 random bytes, URL-safe (43 characters)."""
    return secrets.token_urlsafe(32)


def is_loopback_host(host: str) -> bool:
    """True for `localhost`, `::1` and every 127.0.0.0/8 address."""
    host = host.strip().lower()
    return host in _LOOPBACK_NAMES or (host.startswith("127.") and host.count(".") == 3)


def _key(url: str) -> tuple[str, int] | None:
    parts = urlsplit(url if "://" in url else f"http://{url}")
    if not parts.hostname:
        return None
    try:
        port = parts.port or (443 if parts.scheme in ("https", "wss") else 80)
    except ValueError:
        return None
    host = "loopback" if is_loopback_host(parts.hostname) else parts.hostname.lower()
    return host, port


def remember_token(base_url: str, token: str) -> None:
    """Record the token of a server this process started (`LocalServer` does it)."""
    key = _key(base_url)
    if key is not None:
        with _lock:
            _tokens[key] = token


def forget_token(base_url: str) -> None:
    key = _key(base_url)
    if key is not None:
        with _lock:
            _tokens.pop(key, None)


def _runtime_dir() -> Path:
    explicit = os.environ.get("OPENENV_RUNTIME_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    return Path(xdg) / "openenv" if xdg else Path.home() / ".cache" / "openenv" / "run"


def token_file(port: int) -> Path:
    """Where `openenv serve` on `port` leaves its token for the same user's clients."""
    return _runtime_dir() / f"server-{port}.token"


def write_token_file(port: int, token: str) -> Path:
    """Write the token readable by this user only (folder 0700, file 0600, never world-readable)."""
    path = token_file(port)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as fh:
        os.fchmod(fh.fileno(), 0o600)
        fh.write(token)
    return path


def remove_token_file(port: int, token: str) -> None:
    """Remove the token file if it is still ours (a later server on the port may have replaced it)."""
    path = token_file(port)
    with contextlib.suppress(OSError):
        if path.read_text().strip() == token:
            path.unlink()


def token_for(base_url: str) -> str | None:
    """The token to send to the server at `base_url`: this process's own server's, else
    `$OPENENV_TOKEN`, else (loopback only) the token file of that port; None when none is known."""
    key = _key(base_url)
    if key is None:
        return os.environ.get(TOKEN_ENV) or None
    with _lock:
        known = _tokens.get(key)
    if known:
        return known
    if os.environ.get(TOKEN_ENV):
        return os.environ[TOKEN_ENV]
    if key[0] == "loopback":
        path = token_file(key[1])
        with contextlib.suppress(OSError):
            if path.stat().st_uid == os.getuid():  # never a token someone else left for us to send
                return path.read_text().strip() or None
    return None


def auth_headers(base_url: str, token: str | None = None) -> dict[str, str]:
    """`{"Authorization": "Bearer ..."}` for `base_url` (or `token`), or `{}` when no token is known."""
    token = token or token_for(base_url)
    return {"Authorization": f"Bearer {token}"} if token else {}
