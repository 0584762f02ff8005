"""`build_harbor_app`: the Harbor env server's ASGI app: our env server (sessions, `/ws`, `/mcp`, token,
Host/Origin checks) with the Harbor env class, plus the reference's Task API.

The Task API (`GET /harbor_env/splits`, `POST /harbor_env/num_tasks`, `/task`, `/task_range`, `/tasks`,
and `GET /list_environments`) answers in the reference's shapes. The reference's `HarborEnv` sends its
token only on the WebSocket and `/mcp`, never on these routes, so discovery has its own rule
(`open_discovery`): when open, these routes need no token (they reveal the split names and, per task,
its index, id and instruction: docs/interop.md); every rollout stays behind the token either way.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from fastapi import APIRouter, FastAPI, HTTPException, Request
from pydantic import BaseModel

from openenv.harbor_server.environment import harbor_environment
from openenv.harbor_server.service import HarborService
from openenv.server import create_app
from openenv.server.security import ServerSecurity

__all__ = ["ENV_NAME", "TASK_API_ROUTES", "build_harbor_app"]

ENV_NAME = "harbor_env"
TASK_API_ROUTES = frozenset(
    {
        ("GET", "/list_environments"),
        ("GET", f"/{ENV_NAME}/splits"),
        ("POST", f"/{ENV_NAME}/num_tasks"),
        ("POST", f"/{ENV_NAME}/task"),
        ("POST", f"/{ENV_NAME}/task_range"),
        ("POST", f"/{ENV_NAME}/tasks"),
    }
)


class _Split(BaseModel):
    split: str = ""


class _TaskAt(_Split):
    index: int


class _Range(_Split):
    start: int | None = None
    stop: int | None = None


def build_harbor_app(
    service: HarborService,
    *,
    security: ServerSecurity,
    open_discovery: bool,
    max_sessions: int = 64,
    idle_timeout_s: float | None = 600.0,
) -> FastAPI:
    """The app; `open_discovery` puts the Task API outside the token (see the module doc)."""
    if open_discovery:
        security = dataclasses.replace(security, public_routes=security.public_routes | TASK_API_ROUTES)
    env_class = harbor_environment(service)
    app = create_app(env_class, max_sessions=max_sessions, idle_timeout_s=idle_timeout_s, security=security)
    app.state.harbor = service
    app.include_router(_task_api(service))
    return app


def _task_api(service: HarborService) -> APIRouter:
    router = APIRouter(tags=["Task API"])
    splits = service.splits

    def answer(call: Any) -> Any:
        try:
            return call()
        except IndexError:
            raise HTTPException(status_code=400, detail="Invalid task index") from None

    @router.get("/list_environments")
    async def list_environments() -> list[str]:
        return [ENV_NAME]

    @router.get(f"/{ENV_NAME}/splits")
    async def list_splits() -> list[dict[str, Any]]:
        return splits.listing()

    @router.post(f"/{ENV_NAME}/num_tasks")
    async def num_tasks(body: _Split) -> dict[str, Any]:
        return {"num_tasks": len(splits.sets[splits.split(body.split)])}

    @router.post(f"/{ENV_NAME}/task")
    async def get_task(body: _TaskAt) -> dict[str, Any]:
        return {"task": answer(lambda: splits.ref(body.split, body.index).model_dump())}

    @router.post(f"/{ENV_NAME}/task_range")
    async def get_task_range(body: _Range) -> dict[str, Any]:
        return {"tasks": [t.model_dump() for t in splits.refs(body.split, body.start, body.stop)]}

    @router.post(f"/{ENV_NAME}/tasks")
    async def list_tasks(body: _Split, request: Request) -> dict[str, Any]:
        return {"tasks": [t.model_dump() for t in splits.refs(body.split)], "env_name": ENV_NAME}

    return router
