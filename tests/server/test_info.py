"""Read-only routes: health, metadata, JSON Schemas and OpenAPI."""

from __future__ import annotations

import httpx

from echo_env import EchoAction, EchoObservation, EchoState


def test_health_reports_sessions(http: httpx.Client, echo_url: str) -> None:
    assert http.get(f"{echo_url}/health").json() == {
        "status": "healthy",
        "active_sessions": 0,
        "max_sessions": 64,
    }


def test_metadata_names_the_env_and_its_models(http: httpx.Client, echo_url: str) -> None:
    meta = http.get(f"{echo_url}/metadata").json()
    assert meta["name"] == "echo"
    assert (meta["action_type"], meta["observation_type"], meta["state_type"]) == (
        "EchoAction",
        "EchoObservation",
        "EchoState",
    )
    assert meta["max_sessions"] >= 16


def test_schema_serves_the_models_json_schemas(http: httpx.Client, echo_url: str) -> None:
    schemas = http.get(f"{echo_url}/schema").json()
    assert schemas == {
        "action": EchoAction.model_json_schema(),
        "observation": EchoObservation.model_json_schema(),
        "state": EchoState.model_json_schema(),
    }
    assert schemas["action"]["additionalProperties"] is False


def test_openapi_documents_the_session_routes(http: httpx.Client, echo_url: str) -> None:
    paths = http.get(f"{echo_url}/openapi.json").json()["paths"]
    assert {"/reset", "/step", "/state", "/session", "/health", "/metadata", "/schema"} <= set(paths)
