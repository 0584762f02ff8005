"""`openenv validate` checks: each named, each with an exact message on a broken env or server."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi import FastAPI

from echo_env import EchoEnvironment, EchoObservation
from openenv.core.net import free_port
from openenv.server import LocalServer, create_app
from openenv.validate import Check, example_action, validate_folder, validate_url

ECHO = Path(__file__).resolve().parents[1] / "envs" / "echo"


def by_name(checks: list[Check]) -> dict[str, Check]:
    return {c.name: c for c in checks}


def module_name(tmp_path: Path) -> str:
    """A package name unique to the test, so sys.modules never hands back another test's version."""
    return f"broken_{tmp_path.name}.mod"


def write_env(tmp_path: Path, manifest: str, module: str = "") -> Path:
    folder = tmp_path / "env"
    package = folder / f"broken_{tmp_path.name}"
    package.mkdir(parents=True)
    (folder / "openenv.yaml").write_text(manifest)
    (package / "__init__.py").write_text("")
    (package / "mod.py").write_text(module)
    return folder


def test_the_echo_folder_passes_every_static_check() -> None:
    checks = validate_folder(ECHO)
    assert [c.name for c in checks] == [
        "manifest",
        "env.class",
        "models.action",
        "models.observation",
        "models.state",
        "client.class",
    ]
    assert all(c.ok for c in checks), checks


def test_a_missing_manifest_is_named(tmp_path: Path) -> None:
    (check,) = validate_folder(tmp_path)
    assert not check.ok
    assert (
        check.message
        == f"NotFound: no openenv.yaml at {tmp_path}/openenv.yaml; run `openenv init NAME` to scaffold one"
    )


def test_bad_manifest_fields_are_each_named(tmp_path: Path) -> None:
    folder = write_env(tmp_path, "name: Bad Name\nenvironment: not-a-ref\nflavour: x\n")
    (check,) = validate_folder(folder)
    assert not check.ok
    assert "'name': String should match pattern" in check.message
    assert "'environment': String should match pattern" in check.message
    assert "'flavour': Extra inputs are not permitted" in check.message


def test_an_unimportable_env_class_is_named(tmp_path: Path) -> None:
    mod = module_name(tmp_path)
    folder = write_env(tmp_path, f"name: broken\nenvironment: {mod}:Missing\n")
    checks = by_name(validate_folder(folder))
    assert checks["manifest"].ok
    assert not checks["env.class"].ok
    assert (
        checks["env.class"].message
        == f"NotFound: module '{mod}' has no attribute 'Missing' (from '{mod}:Missing')"
    )


def test_a_class_that_is_not_an_environment_is_named(tmp_path: Path) -> None:
    mod = module_name(tmp_path)
    folder = write_env(tmp_path, f"name: broken\nenvironment: {mod}:Thing\n", "class Thing:\n    pass\n")
    check = by_name(validate_folder(folder))["env.class"]
    assert not check.ok and "not an openenv Environment subclass" in check.message


def test_an_env_with_bare_models_fails_the_model_checks(tmp_path: Path) -> None:
    mod = module_name(tmp_path)
    source = (
        "from openenv.core import Environment\n"
        "class Bare(Environment):\n"
        "    def reset(self, seed=None, episode_id=None, **o): ...\n"
        "    def step(self, action): ...\n"
        "    @property\n"
        "    def state(self): ...\n"
    )
    checks = by_name(validate_folder(write_env(tmp_path, f"name: broken\nenvironment: {mod}:Bare\n", source)))
    assert checks["env.class"].ok
    assert checks["models.action"].message == (
        "the env still uses the bare Action; declare its own subclass with its fields"
    )
    assert not checks["models.observation"].ok
    assert checks["models.state"].ok  # the bare State is a fine state


def test_an_env_module_that_does_not_compile_fails_its_check_instead_of_crashing(tmp_path: Path) -> None:
    mod = module_name(tmp_path)
    folder = write_env(tmp_path, f"name: broken\nenvironment: {mod}:Env\n", "def oops(:\n")
    check = by_name(validate_folder(folder))["env.class"]
    assert not check.ok and check.message.startswith("SyntaxError: ")


def test_an_abstract_env_class_names_the_missing_methods(tmp_path: Path) -> None:
    mod = module_name(tmp_path)
    source = "from openenv.core import Environment\nclass Half(Environment):\n    def step(self, a): ...\n"
    check = by_name(validate_folder(write_env(tmp_path, f"name: broken\nenvironment: {mod}:Half\n", source)))[
        "env.class"
    ]
    assert check.message == "Half does not implement reset, state"


@pytest.fixture
def echo_url() -> Iterator[str]:
    with LocalServer(create_app(EchoEnvironment)) as server:
        yield server.base_url


def test_a_live_echo_server_passes_the_round_trips(echo_url: str) -> None:
    checks = validate_url(echo_url)
    assert [c.name for c in checks] == [
        "live.health",
        "live.schema",
        "live.http_round_trip",
        "live.ws_round_trip",
    ]
    assert all(c.ok for c in checks), checks


class LyingObservation(EchoObservation):
    """Declares message_length an int but the env below sends a string in its place."""


class LyingEnv(EchoEnvironment):
    observation_type = LyingObservation

    def step(self, action):  # type: ignore[no-untyped-def]
        obs = super().step(action)
        return obs.model_construct(**(obs.model_dump() | {"message_length": "five"}))


@pytest.mark.filterwarnings("ignore:Pydantic serializer warnings:UserWarning")
def test_a_server_whose_observations_break_its_schema_fails_the_round_trip() -> None:
    with LocalServer(create_app(LyingEnv)) as server:
        checks = by_name(validate_url(server.base_url))
    assert checks["live.schema"].ok
    assert checks["live.http_round_trip"].message == (
        "POST /step: the observation does not match its served schema at 'message_length': "
        "'five' is not of type 'integer'"
    )


def test_a_server_without_the_protocol_fails_health_and_schema() -> None:
    with LocalServer(FastAPI()) as server:
        checks = validate_url(server.base_url)
    assert [(c.name, c.ok) for c in checks] == [("live.health", False), ("live.schema", False)]
    assert (
        checks[0].message
        == "GET /health answered 404 '{\"detail\":\"Not Found\"}'; expected 200 with status 'healthy'"
    )
    assert (
        checks[1].message == "GET /schema answered 404 without action, observation, state; expected all three"
    )


def test_nothing_listening_is_a_named_failure() -> None:
    checks = validate_url(f"http://127.0.0.1:{free_port()}", timeout_s=1)
    assert not checks[0].ok and checks[0].message.startswith("ConnectError")


@pytest.mark.parametrize(
    ("schema", "action"),
    [
        ({"examples": [{"message": "hi"}], "required": ["x"]}, {"message": "hi"}),
        (
            {
                "required": ["s", "n", "b", "e", "o", "lst"],
                "properties": {
                    "s": {"type": "string", "minLength": 3},
                    "n": {"type": "integer", "minimum": 2},
                    "b": {"type": "boolean"},
                    "e": {"enum": ["up", "down"]},
                    "o": {"anyOf": [{"type": "null"}, {"type": "number"}]},
                    "lst": {"type": "array"},
                },
            },
            {"s": "xxx", "n": 2, "b": False, "e": "up", "o": 0, "lst": []},
        ),
    ],
)
def test_example_actions_come_from_examples_or_required_fields(schema: dict, action: dict) -> None:
    assert example_action(schema) == action


def test_a_manifest_that_names_neither_an_environment_nor_an_app_says_so(tmp_path: Path) -> None:
    (check,) = validate_folder(write_env(tmp_path, "name: empty\n"))
    assert (
        not check.ok and "name the env to serve: `environment: module:Class` (ours) or `app:" in check.message
    )


def test_an_app_folder_is_checked_for_its_module_and_its_import(tmp_path: Path) -> None:
    """A reference-style manifest (`app:`): the module must be in the folder and import under the interpreter
    that serves it; here an app that needs nothing but FastAPI, so this interpreter serves it."""
    mod = module_name(tmp_path)
    folder = write_env(
        tmp_path,
        f"spec_version: 1\nname: plain\ntype: space\nruntime: fastapi\napp: {mod}:app\nport: 8000\n",
        "from fastapi import FastAPI\napp = FastAPI()\n",
    )
    checks = by_name(validate_folder(folder, python=sys.executable))
    assert list(checks) == ["manifest", "app.module", "app.import"]
    assert checks["app.module"].message == f"{mod.replace('.', '/')}.py"
    assert checks["app.import"].ok and "fastapi.applications.FastAPI" in checks["app.import"].message
    (folder / f"{mod.replace('.', '/')}.py").unlink()
    checks = by_name(validate_folder(folder, python=sys.executable))
    assert not checks["app.module"].ok and "app.import" not in checks
