"""schemathesis against the env server's own OpenAPI document: no 5xx, and every answer as documented.

The real `schemathesis` CLI fuzzes a real uvicorn-served server over loopback, through all its phases
(examples, coverage, fuzzing, and stateful reset -> step -> state -> close chains) with its default
checks, which are all of them (server errors, status codes, response schemas, content types,
positive/negative data handling...). `--checks all` is not passed: a CLI option beats the per-operation
config below.
Each run is bounded by `--max-time` (plus ~10 s of CLI start-up and schema loading), under a minute.

- The echo env, whole API, then `/step` again with a live session so actions reach the env.
- A harness env (`pi`), cheaply: its sandbox factory refuses, so a reset validates everything (task,
  timeout, sandbox, unknown options) and then answers 400 instead of starting a harness. The document
  is given the harness's `ResetOptions` model for `options`, so schemathesis fuzzes real option values.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from echo_env import EchoEnvironment
from openenv.core.net import free_port
from openenv.errors import Unsupported
from openenv.server import LocalServer, create_app

MAX_EXAMPLES = 25
MAX_TIME_S = 20  # a budget schemathesis fills: fuzzing and stateful runs repeat until it is spent
# Reset options are the env's own keyword arguments: a schema-valid set the env does not take (echo
# takes only max_steps) is a 400 by design, so "positive data accepted" is not asked of /reset.
CONFIG = """
[[operations]]
include-path = "/reset"
checks.positive_data_acceptance.enabled = false
"""
CLI = [sys.executable, "-c", "from schemathesis.cli import schemathesis; schemathesis()"]


def schemathesis_run(schema: str, tmp_path: Path, *args: str, token: str | None = None) -> dict[str, Any]:
    """Run the CLI with the server's bearer token; returns its exit code, output and the counts of its summary."""
    config = tmp_path / "schemathesis.toml"
    config.write_text(CONFIG)
    cmd = [
        *CLI,
        "--no-color",
        "--config-file",
        str(config),
        "run",
        schema,
        "--max-examples",
        str(MAX_EXAMPLES),
        "--max-time",
        str(MAX_TIME_S),
        "--generation-database",
        "none",
        "--request-timeout",
        "30",
        *(["--header", f"Authorization:Bearer {token}"] if token else []),
        *args,
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=180, check=False)
    out = done.stdout + done.stderr
    cases = re.search(r"(\d+) generated", out)
    failures = re.findall(r"^\s*❌ (\S+) (.+?): (\d+)$", out, flags=re.MULTILINE)
    return {
        "rc": done.returncode,
        "output": out,
        "cases": int(cases.group(1)) if cases else 0,
        "failures": {f"{code} {name}": int(n) for code, name, n in failures},
        "server_errors": sum(
            int(n) for code, name, n in failures if "server error" in f"{code} {name}".lower()
        ),
    }


def assert_clean(run: dict[str, Any]) -> None:
    detail = run["output"][-6000:]
    assert run["failures"] == {} and run["rc"] == 0, detail
    assert run["cases"] >= 100, detail


@pytest.fixture
def echo_server() -> Iterator[LocalServer]:
    # The stateful phase resets hundreds of times and closes none of those sessions; with the default 64 it
    # fills the server, whose documented answer is then 503 `capacity` (tested in tests/server), which
    # schemathesis counts as a server error. Room for every reset keeps the run about the API, not capacity.
    app = create_app(EchoEnvironment, max_sessions=100_000)
    server = LocalServer(app).start(timeout_s=60)  # a loaded machine is slow
    try:
        yield server
    finally:
        server.stop()


def test_echo_env_server_has_no_server_errors_and_answers_as_documented(
    echo_server: LocalServer, tmp_path: Path, figures: Any
) -> None:
    run = schemathesis_run(f"{echo_server.base_url}/openapi.json", tmp_path, token=echo_server.token)
    assert_clean(run)
    figures.record(
        cases=run["cases"], failures=sum(run["failures"].values()), server_errors=run["server_errors"]
    )


def test_echo_steps_with_a_live_session_validate_every_action(
    echo_server: LocalServer, tmp_path: Path, figures: Any
) -> None:
    url, auth = echo_server.base_url, echo_server.headers
    sid = httpx.post(f"{url}/reset", json={}, headers=auth, timeout=10).json()["session_id"]
    run = schemathesis_run(
        f"{url}/openapi.json",
        tmp_path,
        "--include-path",
        "/step",
        "--phases",
        "coverage,fuzzing",
        "--header",
        f"X-Session-Id:{sid}",
        token=echo_server.token,
    )
    assert_clean(run)
    state = httpx.get(f"{url}/state", headers={"X-Session-Id": sid, **auth}, timeout=10).json()
    assert state["step_count"] > 0, "no fuzzed action was accepted"
    figures.record(cases=run["cases"], steps_accepted=state["step_count"], server_errors=run["server_errors"])


@pytest.mark.slow
def test_harness_env_server_validates_reset_without_5xx(
    tmp_path: Path, tiny_model: Path, figures: Any
) -> None:
    from openenv.capture.backends.vllm import VLLMBackend
    from openenv.capture.server import CaptureServer
    from openenv.harness.environment import EpisodeHooks, HarnessEnvironment, ResetOptions
    from openenv.harness.models import HarnessAction, HarnessObservation, HarnessState

    def no_sandbox(ports: tuple[int, ...]) -> Any:
        raise Unsupported("this server only validates: it starts no sandbox")

    # No harness ever starts, so the backend is never called: no model weights to load.
    idle = VLLMBackend(f"http://127.0.0.1:{free_port()}", model="tiny", context_window=4096)
    with CaptureServer(backend=idle, model=tiny_model) as capture:
        app = create_app(
            lambda: HarnessEnvironment("pi", server=capture, hooks=EpisodeHooks(sandbox_factory=no_sandbox)),
            action_type=HarnessAction,
            observation_type=HarnessObservation,
            state_type=HarnessState,
        )
        with LocalServer(app) as server:
            document = httpx.get(f"{server.base_url}/openapi.json", timeout=30).json()
            path = tmp_path / "openapi.json"
            path.write_text(json.dumps(with_reset_options(document, ResetOptions)))
            run = schemathesis_run(str(path), tmp_path, "--url", server.base_url, token=server.token)
            live = httpx.get(f"{server.base_url}/health", timeout=10).json()["active_sessions"]
    assert_clean(run)
    assert live == 0, "a failed reset must not hold a session"
    figures.record(
        cases=run["cases"], failures=sum(run["failures"].values()), server_errors=run["server_errors"]
    )


def with_reset_options(document: dict[str, Any], model: Any) -> dict[str, Any]:
    """The document with `ResetRequest.options` typed by the env's options model (lifted $defs)."""
    schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
    components = document["components"]["schemas"]
    for name, sub in schema.pop("$defs", {}).items():
        components.setdefault(name, sub)
    components["ResetRequest"]["properties"]["options"] = schema
    return document
