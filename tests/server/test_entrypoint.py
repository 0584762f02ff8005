"""`server/app.py`, the deployment entry point (the Dockerfile's CMD): which env it serves."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from openenv.scaffold import scaffold

ENTRYPOINT = Path(__file__).resolve().parents[2] / "server" / "app.py"


def load_entrypoint() -> ModuleType:
    spec = importlib.util.spec_from_file_location("openenv_server_entrypoint", ENTRYPOINT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def client_of(app: FastAPI) -> TestClient:
    """A test client that calls the app as a loopback client with the token it printed."""
    return TestClient(
        app, base_url="http://127.0.0.1", headers={"Authorization": f"Bearer {app.state.security.token}"}
    )


def test_without_openenv_env_it_serves_what_the_root_manifest_names(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENENV_ENV", raising=False)
    app = load_entrypoint().app
    with client_of(app) as client:
        assert client.get("/metadata").json()["name"] == "echo"


def test_openenv_env_names_another_env_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = scaffold("entry_demo", tmp_path)
    monkeypatch.setenv("OPENENV_ENV", str(folder))
    monkeypatch.setenv("OPENENV_MAX_SESSIONS", "3")
    app = load_entrypoint().app
    with client_of(app) as client:
        meta = client.get("/metadata").json()
    assert (meta["name"], meta["max_sessions"]) == ("entry_demo", 3)


def test_the_deployment_reads_its_token_and_hosts_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENENV_ENV", raising=False)
    monkeypatch.setenv("OPENENV_TOKEN", "a-token-from-the-space-secret")
    monkeypatch.setenv("OPENENV_ALLOWED_HOSTS", "owner-env.hf.space")
    app = load_entrypoint().app
    with TestClient(app, base_url="https://owner-env.hf.space") as client:
        assert client.get("/metadata").status_code == 401
        ok = client.get("/metadata", headers={"Authorization": "Bearer a-token-from-the-space-secret"})
        assert ok.status_code == 200
    with TestClient(app, base_url="http://evil.example") as client:
        assert client.get("/health").status_code == 403  # DNS rebinding: not a name it serves


def test_the_deployment_refuses_no_token_on_a_public_bind(monkeypatch: pytest.MonkeyPatch) -> None:
    from openenv.errors import BadRequest

    monkeypatch.delenv("OPENENV_ENV", raising=False)
    monkeypatch.setenv("OPENENV_HOST", "0.0.0.0")
    monkeypatch.setenv("OPENENV_NO_TOKEN", "1")
    with pytest.raises(BadRequest, match="loopback"):
        load_entrypoint()
