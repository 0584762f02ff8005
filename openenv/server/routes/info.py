"""Read-only routes: `/health`, `/metadata` and `/schema` (the JSON Schemas of the env's models)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends
from pydantic import BaseModel, ConfigDict

from openenv.core.environment import EnvMetadata
from openenv.server.routes.deps import env_types, registry
from openenv.server.sessions import EnvSessionRegistry, EnvTypes

__all__ = ["Health", "Metadata", "Schemas", "health", "metadata", "router", "schema"]

router = APIRouter(tags=["info"])


class Health(BaseModel):
    model_config = ConfigDict(extra="forbid")

    status: Literal["healthy"] = "healthy"
    active_sessions: int
    max_sessions: int


class Metadata(EnvMetadata):
    action_type: str
    observation_type: str
    state_type: str
    max_sessions: int
    idle_timeout_s: float | None


class Schemas(BaseModel):
    model_config = ConfigDict(extra="forbid")

    action: dict[str, Any]
    observation: dict[str, Any]
    state: dict[str, Any]


@router.get("/health")
async def health(reg: Annotated[EnvSessionRegistry, Depends(registry)]) -> Health:
    return Health(active_sessions=reg.active, max_sessions=reg.max_sessions)


@router.get("/metadata")
async def metadata(
    types: Annotated[EnvTypes, Depends(env_types)], reg: Annotated[EnvSessionRegistry, Depends(registry)]
) -> Metadata:
    return Metadata(
        **types.metadata.model_dump(),
        action_type=types.action.__name__,
        observation_type=types.observation.__name__,
        state_type=types.state.__name__,
        max_sessions=reg.max_sessions,
        idle_timeout_s=reg.idle_timeout_s,
    )


@router.get("/schema")
async def schema(types: Annotated[EnvTypes, Depends(env_types)]) -> Schemas:
    return Schemas(
        action=types.action.model_json_schema(),
        observation=types.observation.model_json_schema(),
        state=types.state.model_json_schema(),
    )
