"""Isolation: a guessed or foreign session token gets a 401, a harness reads only what its own token
opens, and the proxy's admin API can be locked with a key and moved to a port harnesses never see.

Everything goes over real loopback sockets: the env server under uvicorn, the capture proxy served by
`CaptureServer` (and `openenv proxy` as a subprocess), the official SDKs as harness stand-ins.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest
from google import genai
from google.genai import errors as genai_errors
from google.genai import types as genai_types

from echo_env import EchoEnvironment
from openenv.capture.backends.local import LocalBackend
from openenv.capture.renderer import Renderer
from openenv.capture.server import CaptureServer
from openenv.core.net import free_port
from openenv.server import LocalServer, create_app

ADMIN_KEY = "s3cret-admin-key"
HI: dict[str, Any] = {"model": "tiny", "max_tokens": 3, "messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture
def open_proxy(make_proxy: Callable[..., CaptureServer]) -> CaptureServer:
    """A proxy with the admin API on the main port and no key (the default)."""
    return make_proxy()


@pytest.fixture
def locked_proxy(make_proxy: Callable[..., CaptureServer]) -> CaptureServer:
    """A proxy whose admin API needs the key and lives on a port of its own."""
    return make_proxy(admin_key=ADMIN_KEY, admin_port=0)


def _guess() -> str:
    return secrets.token_urlsafe(18)  # the same shape as a real token


# ---- env server ------------------------------------------------------------------------------------


def test_env_server_answers_guessed_and_foreign_session_ids_with_401(figures: Any) -> None:
    one, other = (
        LocalServer(create_app(EchoEnvironment)).start(),
        LocalServer(create_app(EchoEnvironment)).start(),
    )
    try:
        with httpx.Client(timeout=10) as http:
            # Each server's own token: a session id is the second lock, behind the token (test_server_attacks).
            mine = http.post(f"{one.base_url}/reset", json={}, headers=one.headers).json()["session_id"]
            foreign = http.post(f"{other.base_url}/reset", json={}, headers=other.headers).json()[
                "session_id"
            ]
            probes = [("guessed", _guess()) for _ in range(20)] + [("foreign", foreign)]
            answers = []
            for _, sid in probes:
                for method, path, body in [
                    ("POST", "/step", {"action": {"message": "x"}}),
                    ("GET", "/state", None),
                    ("DELETE", "/session", None),
                ]:
                    r = http.request(
                        method, one.base_url + path, json=body, headers={"X-Session-Id": sid, **one.headers}
                    )
                    answers.append((r.status_code, r.json()["error"]["code"]))
            assert set(answers) == {(401, "unknown_session")}
            assert (
                http.get(f"{one.base_url}/state", headers={"X-Session-Id": mine, **one.headers}).status_code
                == 200
            )
    finally:
        one.stop()
        other.stop()
    figures.record(probes=len(answers), got_401=sum(a[0] == 401 for a in answers))


# ---- capture proxy: model routes -------------------------------------------------------------------


def test_a_guessed_token_gets_401_in_each_dialects_own_shape(open_proxy: CaptureServer, figures: Any) -> None:
    open_proxy.open_session(mode="auto")  # a live session exists; the guesses still must not reach it
    url = f"{open_proxy.base_url}/s/{_guess()}"

    with pytest.raises(openai.AuthenticationError) as chat:
        openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0).chat.completions.create(**HI)
    assert chat.value.body["type"] == "authentication_error"  # type: ignore[index]
    with pytest.raises(openai.AuthenticationError) as responses:
        openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0).responses.create(
            model="tiny", input="hi"
        )
    assert responses.value.body["code"] == "unknown_session"  # type: ignore[index]
    with pytest.raises(anthropic.AuthenticationError) as messages:
        anthropic.Anthropic(base_url=url, api_key="x", max_retries=0).messages.create(**HI)
    assert messages.value.body["error"]["type"] == "authentication_error"  # type: ignore[index]
    gemini = genai.Client(api_key="x", http_options=genai_types.HttpOptions(base_url=url, retry_options=None))
    with pytest.raises(genai_errors.ClientError) as generate:
        gemini.models.generate_content(model="tiny", contents="hi")
    assert generate.value.code == 401 and generate.value.status == "UNAUTHENTICATED"
    # A token sent as the API key instead of in the path is checked the same way.
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(
            base_url=open_proxy.base_url + "/v1", api_key=_guess(), max_retries=0
        ).chat.completions.create(**HI)
    figures.record(dialects_checked=4, got_401=5)


def test_a_closed_sessions_token_is_dead(open_proxy: CaptureServer) -> None:
    session = open_proxy.open_session(mode="auto", token=None)
    client = openai.OpenAI(base_url=session.base_url + "/v1", api_key="x", max_retries=0)
    client.chat.completions.create(**HI)
    open_proxy.close_session(session.token)
    with pytest.raises(openai.AuthenticationError):
        client.chat.completions.create(**HI)


# ---- capture proxy: admin API ----------------------------------------------------------------------


def test_without_a_key_a_trajectory_opens_only_to_its_own_token(
    open_proxy: CaptureServer, figures: Any
) -> None:
    a, b = open_proxy.open_session(mode="auto"), open_proxy.open_session(mode="auto")
    for session in (a, b):
        openai.OpenAI(base_url=session.base_url + "/v1", api_key="x", max_retries=0).chat.completions.create(
            **HI
        )
    base = open_proxy.base_url
    with httpx.Client(timeout=10) as http:
        guessed = [
            http.get(f"{base}/sessions/{_guess()}/{what}")
            for what in ("trajectory", "sequences")
            for _ in range(10)
        ]
        assert {r.status_code for r in guessed} == {401}
        listing = http.get(f"{base}/sessions")
        assert (
            listing.status_code in (404, 405) and a.token not in listing.text and b.token not in listing.text
        )
        own = http.get(f"{base}/sessions/{a.token}/trajectory").json()
        assert own["token"] == a.token and len(own["turns"]) == 1
    figures.record(guessed_reads=len(guessed), got_401=sum(r.status_code == 401 for r in guessed))


def test_an_admin_key_locks_every_admin_route(
    renderer: Renderer, local_backend: LocalBackend, figures: Any
) -> None:
    with CaptureServer(backend=local_backend, renderer=renderer, admin_key=ADMIN_KEY) as proxy:
        harness = proxy.open_session(mode="auto")
        openai.OpenAI(base_url=harness.base_url + "/v1", api_key="x", max_retries=0).chat.completions.create(
            **HI
        )
        base, token = proxy.base_url, harness.token
        routes = [
            ("POST", "/sessions"),
            ("GET", f"/sessions/{token}/trajectory"),
            ("GET", f"/sessions/{token}/sequences"),
            ("DELETE", f"/sessions/{token}"),
        ]
        wrong = [
            {},
            {"Authorization": f"Bearer {token}"},
            {"Authorization": "Bearer nope"},
            {"Authorization": ADMIN_KEY},
            {"x-api-key": ADMIN_KEY},
        ]
        with httpx.Client(timeout=10) as http:
            refused = [http.request(m, base + p, headers=h) for m, p in routes for h in wrong]
            assert {(r.status_code, r.json()["error"]["code"]) for r in refused} == {(401, "unauthorized")}
            assert token in proxy.registry.sessions, "a refused DELETE must not close the session"
            key = {"Authorization": f"Bearer {ADMIN_KEY}"}
            assert len(http.get(f"{base}/sessions/{token}/trajectory", headers=key).json()["turns"]) == 1
            opened = http.post(f"{base}/sessions", headers=key, json={})
            assert opened.status_code == 201 and opened.json()["base_url"].startswith(base + "/s/")
            assert http.delete(f"{base}/sessions/{token}", headers=key).status_code == 204
        # the in-process API (what HarnessEnvironment uses) needs no key
        proxy.close_session(proxy.open_session(mode="auto").token)
    figures.record(refused_admin_calls=len(refused), got_401=sum(r.status_code == 401 for r in refused))


def test_a_separate_admin_port_keeps_admin_routes_off_the_model_port(locked_proxy: CaptureServer) -> None:
    proxy, key = locked_proxy, {"Authorization": f"Bearer {ADMIN_KEY}"}
    assert proxy.admin_port not in (None, proxy.port)
    with httpx.Client(timeout=10) as http:
        on_model_port = http.post(f"{proxy.base_url}/sessions", headers=key, json={})
        assert on_model_port.status_code == 404
        opened = http.post(f"{proxy.admin_url}/sessions", headers=key, json={"sampling": {"max_tokens": 3}})
        assert opened.status_code == 201
        token, session_url = opened.json()["token"], opened.json()["base_url"]
        assert session_url == f"{proxy.base_url}/s/{token}", "harnesses are sent to the model port"
        openai.OpenAI(base_url=session_url + "/v1", api_key="x", max_retries=0).chat.completions.create(**HI)
        assert http.get(f"{proxy.base_url}/sessions/{token}/trajectory", headers=key).status_code == 404
        assert http.get(f"{proxy.admin_url}/sessions/{token}/trajectory").status_code == 401
        assert (
            len(http.get(f"{proxy.admin_url}/sessions/{token}/trajectory", headers=key).json()["turns"]) == 1
        )
        model_on_admin = http.post(f"{proxy.admin_url}/s/{token}/v1/chat/completions", json=HI)
        assert model_on_admin.status_code == 404


def test_openenv_proxy_admin_key_from_the_environment_and_admin_port(
    tiny_model: Path, read_until: Callable[..., str]
) -> None:
    port, admin_port = free_port(), free_port()
    cmd = [
        sys.executable,
        "-m",
        "openenv.cli.main",
        "proxy",
        "--model",
        str(tiny_model),
        "--port",
        str(port),
        "--admin-port",
        str(admin_port),
        "--no-journal",
    ]  # (journaling has its own tests; no files in $HOME)
    env = {**os.environ, "OPENENV_CAPTURE_ADMIN_KEY": ADMIN_KEY}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        banner = read_until(proc, "capture proxy on", timeout_s=180)
        assert f"POST http://127.0.0.1:{admin_port}/sessions" in banner
        with httpx.Client(timeout=10) as http:
            admin = f"http://127.0.0.1:{admin_port}/sessions"
            assert http.post(admin, json={}).status_code == 401
            opened = http.post(admin, json={}, headers={"Authorization": f"Bearer {ADMIN_KEY}"})
            assert opened.json()["base_url"].startswith(f"http://127.0.0.1:{port}/s/")
            assert http.post(f"http://127.0.0.1:{port}/sessions", json={}).status_code == 404
    finally:
        proc.terminate()
        proc.wait(30)


def _episode_servers(tiny_model: Path) -> dict[str, Callable[[], CaptureServer]]:
    """Every road by which an episode gets its capture server, each started the way that road starts it."""
    from types import SimpleNamespace

    from trl import GRPOConfig

    from openenv.capture.engine import CapturePool, EngineSpec, shared_capture_server
    from openenv.train.policy_server import policy_server

    trainer = SimpleNamespace(
        args=GRPOConfig(
            output_dir="/tmp/openenv-unused",
            use_cpu=True,
            report_to="none",
            vllm_server_base_url="http://127.0.0.1:9",
        )
    )
    return {
        # HarnessEnvironment with no server (openenv run / eval / serve): the process's shared one.
        "env": lambda: shared_capture_server(EngineSpec.of("local", model=tiny_model)),
        # A training run's episodes (RolloutConfig on threads): the trainer's policy server. It was
        # started with no admin key before the engine became one value: POST /sessions answered 201.
        "training": lambda: policy_server(trainer, EngineSpec("vllm", model=str(tiny_model)), CapturePool()),
    }


@pytest.mark.parametrize("road", ["env", "training"])
def test_every_episode_capture_server_locks_its_admin_api(tiny_model: Path, road: str) -> None:
    """A sandboxed harness can reach its capture server's port; it must not open, list, read or close
    sessions there (opening them until the server is full starves the other episodes of the run; closing
    its own ends its episode in an outage)."""
    proxy = _episode_servers(tiny_model)[road]()
    session = proxy.open_session(mode="auto")  # the episode's own in-process path still works
    try:
        with httpx.Client(timeout=10) as http:
            assert http.post(f"{proxy.base_url}/sessions", json={}).status_code == 401
            assert http.get(f"{proxy.base_url}/sessions").status_code == 401
            assert http.get(f"{proxy.base_url}/sessions/{session.token}/trajectory").status_code == 401
            assert http.delete(f"{proxy.base_url}/sessions/{session.token}").status_code == 401
    finally:
        proxy.close_session(session.token)
        if road == "training":
            proxy.stop()
