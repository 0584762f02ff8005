"""Our client, `validate`, `AutoEnv` and `serve` on an env made and served by the reference OpenEnv.

The env is what the reference's own `openenv init` writes (`openenv==0.10.0`, its echo template), and
the server is the reference's, started the way the template says, `python -m uvicorn server.app:app` from
inside the env folder, under the reference's interpreter. Nothing of the reference is imitated here; the
one stand-in is the Hugging Face Hub (unreachable from CI), answering the single lookup `AutoEnv` makes
for a Space id, `GET /api/spaces/{owner}/{name}`, with the URL of the reference server.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.responses import JSONResponse
from pydantic import Field, ValidationError
from typer.testing import CliRunner

from openenv.app_runner import app_environ
from openenv.auto import AutoEnv
from openenv.cli.main import app as cli
from openenv.client import AnyObservation, AnyState, EnvClient
from openenv.core.net import free_port, wait_for_health
from openenv.core.types import Action, Observation, State
from openenv.errors import CapacityError, InvalidAction, NotFound, TransportError, UnexpectedReply
from openenv.manifest import Manifest
from openenv.server import LocalServer
from openenv.validate import validate_folder, validate_url
from tests.interop.conftest import Reference

REPO = Path(__file__).resolve().parents[2]
ENV_NAME = "refecho"
READY = "Refecho environment ready!"  # what the template's reset says, with the env's title name


class RefechoAction(Action):
    """Our own model of the reference template's action (its fields, declared on our base)."""

    message: str


class RefechoObservation(Observation):
    echoed_message: str = ""
    message_length: int = 0


class RefechoClient(EnvClient[RefechoAction, RefechoObservation, State]):
    """A client typed by our models, for the reference's server."""


@pytest.fixture(scope="session")
def reference_env(reference: Reference, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An env folder made by the reference's `openenv init`, with the reference as its `.venv` (what
    `uv sync` in the folder would make; here the reference's venv, linked)."""
    parent = tmp_path_factory.mktemp("reference-envs")
    made = reference.cli("init", ENV_NAME, "--output-dir", str(parent))
    assert made.returncode == 0, made.stdout + made.stderr
    folder = parent / ENV_NAME
    (folder / ".venv").symlink_to(reference.python.parent.parent, target_is_directory=True)
    return folder


def _serve_with_reference(reference: Reference, folder: Path) -> tuple[subprocess.Popen[str], str]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    proc = subprocess.Popen(
        [
            str(reference.python),
            "-m",
            "uvicorn",
            "server.app:app",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        cwd=folder,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    wait_for_health(
        url, timeout_s=180, gone=lambda: None if proc.poll() is None else f"exited with {proc.returncode}"
    )
    return proc, url


@pytest.fixture(scope="session")
def reference_server(reference: Reference, reference_env: Path) -> Iterator[str]:
    """The reference serving its own env folder, on a free loopback port (its template allows one session)."""
    proc, url = _serve_with_reference(reference, reference_env)
    yield url
    proc.terminate()
    proc.wait(timeout=30)


async def test_our_typed_client_reads_the_reference_nested_observations_and_state(
    reference_server: str,
) -> None:
    async with RefechoClient.from_url(reference_server) as env:
        first = await env.reset(seed=7, episode_id="ep-ours")
        obs = await env.step(RefechoAction(message="hello"))
        state = await env.state()
    assert isinstance(first, RefechoObservation) and isinstance(obs, RefechoObservation)
    assert (first.echoed_message, first.message_length, first.reward, first.done) == (READY, 0, 0.0, False)
    assert (obs.echoed_message, obs.message_length, obs.reward, obs.done) == ("hello", 5, 0.5, False)
    assert obs.metadata == {"original_message": "hello", "step": 1}
    assert (state.episode_id, state.step_count) == ("ep-ours", 1)


def test_autoenv_on_the_reference_url_runs_reset_step_state(reference_server: str) -> None:
    with AutoEnv.from_env(reference_server).sync() as env:
        first = env.reset(episode_id="ep-auto", difficulty="ignored-by-the-template")  # keywords pass through
        obs = env.step({"message": "abc"})
        state = env.state()
    assert isinstance(obs, AnyObservation) and isinstance(state, AnyState)
    assert first.model_extra == {"echoed_message": READY, "message_length": 0}
    assert obs.model_extra == {"echoed_message": "abc", "message_length": 3}
    assert obs.reward == pytest.approx(0.3)
    assert (state.episode_id, state.step_count) == ("ep-auto", 1)


async def test_reference_errors_arrive_as_our_errors_never_as_validation_errors(
    reference_server: str,
) -> None:
    async with EnvClient(reference_server) as env:
        await env.reset()
        with pytest.raises(InvalidAction) as bad:
            await env.step({"mesage": "typo"})
        # the reference's VALIDATION_ERROR, its pydantic list turned into our one-line field message
        assert "action field 'message': Field required" in bad.value.message
        assert "action field 'mesage': Extra inputs are not permitted" in bad.value.message
        assert bad.value.details["server_code"] == "VALIDATION_ERROR"
        assert (await env.step({"message": "still fine"})).model_extra["echoed_message"] == "still fine"

        # the template serves one session at a time: a second client gets the reference's CAPACITY_REACHED
        with pytest.raises(CapacityError) as full:
            async with EnvClient(reference_server) as second:
                await second.reset()
        assert (full.value.details["active_sessions"], full.value.details["max_sessions"]) == (1, 1)

    class Scored(Observation):
        score: float = Field(description="A field the reference's echo does not send.")

    class WrongClient(EnvClient[RefechoAction, Scored, State]):
        pass

    async with WrongClient.from_url(reference_server) as wrong:
        try:
            await wrong.reset()
        except ValidationError:  # pragma: no cover - the failure this test exists to catch
            pytest.fail("a raw pydantic ValidationError escaped the client")
        except UnexpectedReply as exc:
            assert exc.message.startswith(
                "the server's reset observation does not fit Scored: "
                "reset observation field 'score': Field required; "
            )
            assert "field 'echoed_message': Extra inputs are not permitted" in exc.message
        else:
            pytest.fail("a reply that does not fit the model was accepted")


def test_validate_url_passes_on_the_reference_server(reference_server: str) -> None:
    checks = {c.name: c for c in validate_url(reference_server)}
    assert all(c.ok for c in checks.values()), checks
    assert list(checks) == ["live.health", "live.schema", "live.http_round_trip", "live.ws_round_trip"]
    assert "stateless HTTP" in checks["live.http_round_trip"].message


def test_the_reference_manifest_is_read_and_its_folder_passes_validate(
    reference_env: Path, reference_server: str
) -> None:
    manifest, folder = Manifest.load(reference_env)
    assert (manifest.name, manifest.app, manifest.port, manifest.type, manifest.runtime) == (
        ENV_NAME,
        "server.app:app",
        8000,
        "space",
        "fastapi",
    )
    assert manifest.is_app and manifest.validation is not None and folder == reference_env.resolve()
    result = CliRunner().invoke(cli, ["validate", str(reference_env), "--url", reference_server])
    assert result.exit_code == 0, result.output
    assert "all 7 checks passed" in result.output
    checks = {c.name: c for c in validate_folder(reference_env, python=sys.executable)}
    assert not checks["app.import"].ok  # our interpreter has no reference: named, not crashed
    assert "does not import under" in checks["app.import"].message


def test_autoenv_on_the_reference_folder_runs_its_app_and_stops_it(reference_env: Path) -> None:
    client = AutoEnv.from_env(str(reference_env))
    url = client.base_url
    with client.sync() as env:
        assert env.reset(episode_id="ep-folder").model_extra["echoed_message"] == READY
        assert env.step({"message": "folder"}).model_extra["message_length"] == 6
        assert (env.state().episode_id, env.state().step_count) == ("ep-folder", 1)
    with pytest.raises(httpx.ConnectError):  # closing the client stopped the app it started
        httpx.get(f"{url}/health", timeout=2)


def test_an_interpreter_without_the_reference_is_a_clear_error(reference_env: Path) -> None:
    with pytest.raises(TransportError) as info:
        AutoEnv.from_env(str(reference_env), python=sys.executable)
    assert "ModuleNotFoundError: No module named 'openenv.core.env_server'" in info.value.message
    assert "pass --python" in info.value.message


class HubStandIn:
    """A stand-in of the one Hub route `AutoEnv` reads for a Space id, `GET /api/spaces/{owner}/{name}`."""

    def __init__(self, spaces: dict[str, dict[str, Any]]) -> None:
        self.spaces = spaces
        self.app = FastAPI()
        self.app.get("/api/spaces/{owner}/{name}")(self.space_info)

    async def space_info(self, owner: str, name: str) -> Any:
        info = self.spaces.get(f"{owner}/{name}")
        if info is None:
            return JSONResponse(
                {"error": "Repository not found"}, status_code=404, headers={"X-Error-Code": "RepoNotFound"}
            )
        return {"id": f"{owner}/{name}", **info}


@pytest.fixture
def hub(reference_server: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The stand-in Hub on a loopback port, as `$HF_ENDPOINT`; CI's offline mode lifted for it alone."""
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    stand_in = HubStandIn(
        {
            "alice/refecho": {
                "host": reference_server,
                "subdomain": "alice-refecho",
                "sdk": "docker",
                "runtime": {"stage": "RUNNING", "hardware": {"current": "cpu-basic"}},
            },
            "alice/broken": {"host": "https://alice-broken.hf.space", "runtime": {"stage": "BUILD_ERROR"}},
        }
    )
    with LocalServer(stand_in.app) as server:
        monkeypatch.setenv("HF_ENDPOINT", server.base_url)
        yield server.base_url


def test_autoenv_on_a_space_id_asks_the_hub_where_it_runs(hub: str, reference_server: str) -> None:
    client = AutoEnv.from_env("alice/refecho")
    assert client.base_url == reference_server
    with client.sync() as env:
        assert env.reset().model_extra["echoed_message"] == READY
        assert env.step({"message": "space"}).model_extra["echoed_message"] == "space"
        assert env.state().step_count == 1
    with pytest.raises(NotFound, match="has no Space 'alice/missing'"):
        AutoEnv.from_env("alice/missing")
    with pytest.raises(TransportError, match="'alice/broken' is BUILD_ERROR"):
        AutoEnv.from_env("alice/broken")


def test_our_serve_runs_the_reference_folder_end_to_end(reference_env: Path) -> None:
    port = free_port()
    env = {**app_environ(), "PYTHONPATH": str(REPO)}  # our CLI from this checkout; the app gets none of it
    proc = subprocess.Popen(
        [sys.executable, "-m", "openenv.cli.main", "serve", str(reference_env), "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_health(
            url, timeout_s=180, gone=lambda: None if proc.poll() is None else f"exited with {proc.returncode}"
        )
        with AutoEnv.from_env(url).sync() as client:
            assert client.reset(episode_id="ep-serve").model_extra["echoed_message"] == READY
            assert client.step({"message": "served"}).reward == pytest.approx(0.6)
            assert (client.state().episode_id, client.state().step_count) == ("ep-serve", 1)
        assert all(c.ok for c in validate_url(url))
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=30)
    assert f"serving {ENV_NAME} (server.app:app from {reference_env.resolve()}) on {url}" in " ".join(
        out.split()
    )
    assert f"with {reference_env.resolve() / '.venv' / 'bin' / 'python'}" in " ".join(out.split())
