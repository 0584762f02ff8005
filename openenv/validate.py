"""`openenv validate`: a flat list of named checks for an env folder and for a running env server.

Static checks read the folder: manifest, env class, models, client; for a folder whose manifest names an
ASGI `app` (the reference OpenEnv's), the app's module and that it imports under the interpreter that would
serve it. Live checks talk to a server, ours or the reference's: health, schema, then a real
reset -> step -> state round trip over HTTP and over WebSocket, each payload validated against the JSON
Schemas the server itself serves. Every failed check names what was wrong.

HTTP differs between the two: ours keeps a session across requests (`session_id`), the reference runs
each request on a fresh env (no `session_id`, so `/state` cannot reflect the step). The HTTP check follows
whichever the server's reset answer shows, and says which it was.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import jsonschema
from pydantic import BaseModel

from openenv.client import EnvClient
from openenv.client.replies import observation_fields
from openenv.core.auth import auth_headers
from openenv.core.environment import Environment
from openenv.core.types import Action, Observation, State
from openenv.core.wire import SESSION_HEADER
from openenv.manifest import Manifest

__all__ = ["Check", "example_action", "validate_folder", "validate_url"]


@dataclass(frozen=True)
class Check:
    """One named check and its outcome; `message` says what was found, or what is wrong and where."""

    name: str
    ok: bool
    message: str


class _Failed(Exception):
    """Raised inside a check body to fail it with a message."""


def _run(name: str, body: Callable[[], str]) -> Check:
    try:
        return Check(name, True, body())
    except _Failed as exc:
        return Check(name, False, str(exc))
    except Exception as exc:
        return Check(name, False, f"{type(exc).__name__}: {exc}")


def validate_folder(path: str | Path, *, python: str | None = None) -> list[Check]:
    """Static checks of an env folder; stops at the first check the others depend on.

    Args:
        path: the env folder (or its openenv.yaml).
        python: for an `app` folder, the interpreter that serves it (see `openenv.app_runner.find_python`).
    """
    checks: list[Check] = []
    loaded: dict[str, Any] = {}

    def manifest() -> str:
        loaded["manifest"], loaded["folder"] = Manifest.load(path)
        return f"{loaded['manifest'].name} {loaded['manifest'].version}"

    checks.append(_run("manifest", manifest))
    if checks[-1].ok and loaded["manifest"].is_app:
        return checks + _app_checks(loaded["manifest"], loaded["folder"], python)

    def env_class() -> str:
        env_cls = loaded["manifest"].load_environment(loaded["folder"])
        if not (isinstance(env_cls, type) and issubclass(env_cls, Environment)):
            raise _Failed(
                f"{loaded['manifest'].environment} is {env_cls!r}, not an openenv Environment subclass"
            )
        if inspect.isabstract(env_cls):
            missing = ", ".join(sorted(env_cls.__abstractmethods__))
            raise _Failed(f"{env_cls.__name__} does not implement {missing}")
        loaded["env"] = env_cls
        return env_cls.__name__

    if checks[-1].ok:
        checks.append(_run("env.class", env_class))
    if "env" in loaded:
        env_cls = loaded["env"]
        for role, base in (("action", Action), ("observation", Observation), ("state", State)):
            model = getattr(env_cls, f"{role}_type")
            checks.append(_run(f"models.{role}", functools.partial(_check_model, model, base)))
    if checks[0].ok and loaded["manifest"].client:
        checks.append(_run("client.class", lambda: _check_client(loaded["manifest"], loaded["folder"])))
    return checks


_IMPORT_APP = """
import importlib, sys
module, _, attr = sys.argv[1].partition(":")
obj = importlib.import_module(module)
for part in attr.split("."):
    obj = getattr(obj, part)
if not callable(obj):
    sys.exit(f"{sys.argv[1]} is {obj!r}, not an ASGI app")
print(type(obj).__module__ + "." + type(obj).__name__)
"""


def _app_checks(manifest: Manifest, folder: Path, python: str | None) -> list[Check]:
    """An `app` folder: its module is in the folder, and it imports under the interpreter that serves it."""
    from openenv.app_runner import app_environ, find_python

    def module() -> str:
        assert manifest.app is not None
        rel = Path(*manifest.app.partition(":")[0].split("."))
        found = [p for p in (folder / rel.with_suffix(".py"), folder / rel / "__init__.py") if p.is_file()]
        if not found:
            raise _Failed(f"{manifest.app}: neither {rel}.py nor {rel}/__init__.py is in {folder}")
        return str(found[0].relative_to(folder))

    def imports() -> str:
        assert manifest.app is not None
        interpreter = find_python(folder, python)
        proc = subprocess.run(
            [str(interpreter), "-c", _IMPORT_APP, manifest.app],
            cwd=folder,
            env=app_environ(),
            capture_output=True,
            text=True,
            timeout=300,
        )
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
            raise _Failed(
                f"{manifest.app} does not import under {interpreter}: {last} (an app built on the reference "
                "OpenEnv needs an interpreter that has it: --python, $OPENENV_APP_PYTHON or FOLDER/.venv)"
            )
        return f"{manifest.app} is a {proc.stdout.strip()} under {interpreter}"

    checks = [_run("app.module", module)]
    if checks[-1].ok:
        checks.append(_run("app.import", imports))
    return checks


def _check_model(model: Any, base: type[BaseModel]) -> str:
    if not (isinstance(model, type) and issubclass(model, base)):
        raise _Failed(
            f"expected a subclass of openenv {base.__name__}, got {model!r}; set it on the env class"
        )
    if model is base and base is not State:
        raise _Failed(
            f"the env still uses the bare {base.__name__}; declare its own subclass with its fields"
        )
    model.model_json_schema()
    return model.__name__


def _check_client(manifest: Manifest, folder: Path) -> str:
    client_cls = manifest.load_client(folder)
    if not (isinstance(client_cls, type) and issubclass(client_cls, EnvClient)):
        raise _Failed(f"{manifest.client} is {client_cls!r}, not an EnvClient subclass")
    return client_cls.__name__


def validate_url(url: str, *, timeout_s: float = 10.0) -> list[Check]:
    """Live checks against a running server; the round trips run only once the schemas are usable."""
    base = url.rstrip("/")
    ctx: dict[str, Any] = {}
    with httpx.Client(base_url=base, timeout=timeout_s, headers=auth_headers(base)) as http:
        checks = [
            _run("live.health", lambda: _health(http)),
            _run("live.schema", lambda: _schemas(http, ctx)),
        ]
        if all(c.ok for c in checks):
            checks.append(_run("live.http_round_trip", lambda: _http_round_trip(http, ctx)))
            checks.append(
                _run("live.ws_round_trip", lambda: asyncio.run(_ws_round_trip(base, ctx, timeout_s)))
            )
    return checks


def _health(http: httpx.Client) -> str:
    r = http.get("/health")
    if r.status_code != 200 or r.json().get("status") != "healthy":
        raise _Failed(
            f"GET /health answered {r.status_code} {r.text[:200]!r}; expected 200 with status 'healthy'"
        )
    body = r.json()
    if "active_sessions" not in body:  # the reference's /health says only that it is healthy
        return "healthy"
    return f"{body.get('active_sessions')} of {body.get('max_sessions')} sessions live"


def _schemas(http: httpx.Client, ctx: dict[str, Any]) -> str:
    r = http.get("/schema")
    body = r.json() if r.status_code == 200 else {}
    missing = [k for k in ("action", "observation", "state") if not isinstance(body.get(k), dict)]
    if missing:
        raise _Failed(
            f"GET /schema answered {r.status_code} without {', '.join(missing)}; expected all three"
        )
    for key in ("action", "observation", "state"):
        try:
            jsonschema.Draft202012Validator.check_schema(body[key])
        except jsonschema.SchemaError as exc:
            raise _Failed(f"the {key} schema is not a valid JSON Schema: {exc.message}") from None
    ctx.update(schemas=body, action=example_action(body["action"]))
    return "action, observation and state schemas are valid JSON Schema"


def _conforms(kind: str, payload: Any, schema: dict[str, Any], where: str) -> None:
    errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(payload), key=str)
    if errors:
        first = errors[0]
        loc = "/".join(map(str, first.absolute_path)) or "(root)"
        raise _Failed(f"{where}: the {kind} does not match its served schema at '{loc}': {first.message}")


def _http_round_trip(http: httpx.Client, ctx: dict[str, Any]) -> str:
    schemas, action = ctx["schemas"], ctx["action"]
    r = http.post("/reset", json={})
    body = r.json() if r.status_code == 200 and "json" in r.headers.get("content-type", "") else None
    if not isinstance(body, dict) or not isinstance(body.get("observation"), dict):
        raise _Failed(
            f"POST /reset answered {r.status_code} {r.text[:300]!r}; expected 200 with an observation"
        )
    sid = body.get("session_id")
    _conforms("observation", _http_observation(body, schemas), schemas["observation"], "POST /reset")
    headers = {SESSION_HEADER: sid} if sid else {}
    try:
        r = http.post("/step", json={"action": action}, headers=headers)
        if r.status_code != 200:
            raise _Failed(f"POST /step with {action} answered {r.status_code} {r.text[:300]!r}")
        _conforms("observation", _http_observation(r.json(), schemas), schemas["observation"], "POST /step")
        r = http.get("/state", headers=headers)
        if r.status_code != 200:
            raise _Failed(f"GET /state answered {r.status_code} {r.text[:300]!r}")
        _conforms("state", r.json(), schemas["state"], "GET /state")
        if sid and r.json().get("step_count") != 1:
            raise _Failed(
                f"GET /state after one step reports step_count={r.json().get('step_count')!r}, not 1"
            )
    finally:
        if sid:
            http.delete("/session", headers=headers)
    if not sid:
        return (
            f"reset -> step {action} -> state conform to the schemas (stateless HTTP, as the reference "
            "serves it: each request ran on a fresh env)"
        )
    return f"reset -> step {action} -> state conform to the schemas"


def _http_observation(body: dict[str, Any], schemas: dict[str, Any]) -> Any:
    """The observation in an HTTP answer, flat: nested under `observation` with `reward`/`done` beside it
    (the reference's shape), or flat under `observation` (ours before the reference's wire)."""
    envelope = {k: v for k, v in body.items() if k != "session_id"}
    declared = schemas["observation"].get("properties", {})
    if set(envelope) == {"observation"}:
        return envelope["observation"]
    return observation_fields(envelope, declared)


async def _ws_round_trip(base: str, ctx: dict[str, Any], timeout_s: float) -> str:
    schemas, action = ctx["schemas"], ctx["action"]
    client: EnvClient[Any, Any, Any] = EnvClient(base, open_timeout_s=timeout_s, request_timeout_s=timeout_s)
    async with client:
        obs = await client.reset()
        _conforms("observation", obs.model_dump(), schemas["observation"], "ws reset")
        obs = await client.step(action)
        _conforms("observation", obs.model_dump(), schemas["observation"], "ws step")
        state = await client.state()
        _conforms("state", state.model_dump(), schemas["state"], "ws state")
    return "reset -> step -> state over /ws conform to the schemas"


def example_action(schema: dict[str, Any]) -> dict[str, Any]:
    """A valid-looking action: the schema's first `examples` entry, else one built from its required fields."""
    if schema.get("examples"):
        return dict(schema["examples"][0])
    defs = schema.get("$defs", {})
    props = schema.get("properties", {})
    return {name: _example_value(props.get(name, {}), defs) for name in schema.get("required", [])}


def _example_value(prop: dict[str, Any], defs: dict[str, Any]) -> Any:
    if "$ref" in prop:
        prop = defs.get(prop["$ref"].rsplit("/", 1)[-1], {})
    for key in ("const", "default"):
        if key in prop:
            return prop[key]
    if prop.get("examples"):
        return prop["examples"][0]
    if prop.get("enum"):
        return prop["enum"][0]
    options = prop.get("anyOf") or prop.get("oneOf")
    if options:
        return _example_value(next((o for o in options if o.get("type") != "null"), options[0]), defs)
    return _by_type(prop, defs)


def _by_type(prop: dict[str, Any], defs: dict[str, Any]) -> Any:
    kind = prop.get("type")
    if kind == "string":
        return "x" * int(prop["minLength"]) if prop.get("minLength") else "hello"
    if kind in ("integer", "number"):
        return prop.get("minimum", 0)
    if kind == "boolean":
        return False
    if kind == "array":
        return []
    if kind == "object":
        return example_action(prop | {"$defs": defs}) if prop.get("properties") else {}
    return None
