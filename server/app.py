"""ASGI entry point for deployments: serves the env named by `$OPENENV_ENV`, else by ./openenv.yaml.

    uvicorn server.app:app            # or: python server/app.py
    OPENENV_ENV=echo python server/app.py

`OPENENV_ENV` takes an installed env name or an env folder. `OPENENV_HOST` (default 127.0.0.1; the
Dockerfile sets 0.0.0.0), `OPENENV_PORT` (8000), `OPENENV_MAX_SESSIONS` (64) and
`OPENENV_IDLE_TIMEOUT_S` (600; 0 turns the reaper off) tune it.

Security (docs/security.md): `OPENENV_TOKEN` is the bearer token clients must send (a fresh one is made
and printed once when it is unset); `OPENENV_ALLOWED_HOSTS` / `OPENENV_ALLOWED_ORIGINS` (comma-separated)
name the Host names and web origins served besides loopback; `OPENENV_NO_TOKEN=1` (loopback binds only),
`OPENENV_ALLOW_INLINE_TASKS=1` and `OPENENV_MAX_BODY_BYTES` mirror `openenv serve`'s flags.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from fastapi import FastAPI

from openenv.auto import EnvSource, load_env, resolve
from openenv.server import create_app
from openenv.server.security import ServerSecurity

ROOT = Path(__file__).resolve().parents[1]


def build_app() -> FastAPI:
    name = os.environ.get("OPENENV_ENV")
    source = resolve(name) if name else EnvSource("folder", "openenv.yaml", str(ROOT))
    loaded = load_env(source)
    idle = float(os.environ.get("OPENENV_IDLE_TIMEOUT_S", "600"))
    security = ServerSecurity.from_environ(os.environ.get("OPENENV_HOST", "127.0.0.1"), os.environ)
    if security.token and not os.environ.get("OPENENV_TOKEN"):
        print(
            f"openenv: token {security.token} (clients send 'Authorization: Bearer <token>' or set "
            "OPENENV_TOKEN)",
            file=sys.stderr,
            flush=True,
        )
    return create_app(
        loaded.env_class,
        metadata=loaded.metadata,
        max_sessions=int(os.environ.get("OPENENV_MAX_SESSIONS", "64")),
        idle_timeout_s=idle or None,
        security=security,
    )


app = build_app()

if __name__ == "__main__":
    import uvicorn

    uvicorn.run(
        app,
        host=os.environ.get("OPENENV_HOST", "127.0.0.1"),
        port=int(os.environ.get("OPENENV_PORT", "8000")),
        ws="websockets-sansio",
        ws_max_size=app.state.security.max_frame_bytes,
        log_level="info",
    )
