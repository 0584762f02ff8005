"""ASGI entry point for deployments: serves the env named by `$OPENENV_ENV`, else by ./openenv.yaml.

    uvicorn server.app:app            # or: python server/app.py
    OPENENV_ENV=echo python server/app.py

`OPENENV_ENV` takes an installed env name or an env folder. `OPENENV_HOST` (default 127.0.0.1; the
Dockerfile sets 0.0.0.0), `OPENENV_PORT` (8000), `OPENENV_MAX_SESSIONS` (64) and
`OPENENV_IDLE_TIMEOUT_S` (600; 0 turns the reaper off) tune it.
"""

from __future__ import annotations

import os
from pathlib import Path

from fastapi import FastAPI

from openenv.auto import EnvSource, load_env, resolve
from openenv.server import create_app

ROOT = Path(__file__).resolve().parents[1]


def build_app() -> FastAPI:
    name = os.environ.get("OPENENV_ENV")
    source = resolve(name) if name else EnvSource("folder", "openenv.yaml", str(ROOT))
    loaded = load_env(source)
    idle = float(os.environ.get("OPENENV_IDLE_TIMEOUT_S", "600"))
    return create_app(
        loaded.env_class,
        metadata=loaded.metadata,
        max_sessions=int(os.environ.get("OPENENV_MAX_SESSIONS", "64")),
        idle_timeout_s=idle or None,
    )


app = build_app()

if __name__ == "__main__":
    import uvicorn

    uvicorn.run(
        app,
        host=os.environ.get("OPENENV_HOST", "127.0.0.1"),
        port=int(os.environ.get("OPENENV_PORT", "8000")),
        ws="websockets-sansio",
        log_level="info",
    )
