"""AutoEnv: the resolution order, the Space URL rule, and real round trips for what runs here."""

from __future__ import annotations

from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from echo_env import EchoEnvironment, EchoObservation
from openenv import auto
from openenv.auto import AutoEnv, EnvSource, discover_envs, hf_space_url, load_env, resolve
from openenv.errors import NotFound
from openenv.server import LocalServer, create_app

REPO_ENVS = Path(__file__).resolve().parents[1] / "envs"


def make_env_folder(root: Path, name: str) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "openenv.yaml").write_text(f"name: {name}\nenvironment: echo_env.environment:EchoEnvironment\n")
    return folder


@pytest.mark.parametrize(
    ("space", "url"),
    [
        ("openenv/echo", "https://openenv-echo.hf.space"),
        ("Owner/My_Env", "https://owner-my-env.hf.space"),
        ("user.name/env.v2", "https://user-name-env-v2.hf.space"),
        ("a-b/c_d.e", "https://a-b-c-d-e.hf.space"),
    ],
)
def test_space_ids_map_to_hf_subdomains(space: str, url: str) -> None:
    assert hf_space_url(space) == url


def test_a_malformed_space_id_is_rejected() -> None:
    with pytest.raises(ValueError, match="owner/name"):
        hf_space_url("no-slash")


def test_an_installed_entry_point_wins_over_a_folder_of_the_same_name(tmp_path: Path) -> None:
    make_env_folder(tmp_path, "echo")
    assert resolve("echo", search_paths=[tmp_path]) == EnvSource(
        "entry_point", "echo", "echo_env.environment:EchoEnvironment"
    )


def test_a_folder_under_a_search_path_resolves(tmp_path: Path) -> None:
    folder = make_env_folder(tmp_path, "local_one")
    assert resolve("local_one", search_paths=[tmp_path]) == EnvSource("folder", "local_one", str(folder))


def test_a_path_to_an_env_folder_resolves(tmp_path: Path) -> None:
    folder = make_env_folder(tmp_path, "by_path")
    assert resolve(str(folder), search_paths=[]).kind == "folder"


def test_search_paths_come_from_the_environment_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_env_folder(tmp_path, "from_env_var")
    monkeypatch.setenv("OPENENV_ENVS_PATH", str(tmp_path))
    assert resolve("from_env_var").kind == "folder"


def test_a_folder_named_like_a_space_id_wins_over_the_space(tmp_path: Path) -> None:
    make_env_folder(tmp_path / "owner", "thing")
    assert resolve("owner/thing", search_paths=[tmp_path]).kind == "folder"


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("http://127.0.0.1:8000/", EnvSource("url", "http://127.0.0.1:8000/", "http://127.0.0.1:8000")),
        ("https://x.example/env", EnvSource("url", "https://x.example/env", "https://x.example/env")),
        (
            "docker:openenv-echo:latest",
            EnvSource("docker", "docker:openenv-echo:latest", "openenv-echo:latest"),
        ),
        ("openenv/Echo_Env", EnvSource("hf_space", "openenv/Echo_Env", "https://openenv-echo-env.hf.space")),
    ],
)
def test_urls_images_and_spaces_resolve_in_order(name: str, expected: EnvSource) -> None:
    assert resolve(name, search_paths=[]) == expected


def test_an_unknown_name_lists_the_known_envs(tmp_path: Path) -> None:
    make_env_folder(tmp_path, "known_one")
    with pytest.raises(NotFound, match=r"no environment named 'nope'.*known envs: echo, known_one"):
        resolve("nope", search_paths=[tmp_path])


def test_entry_points_are_read_from_the_openenv_envs_group(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = EntryPoint("plugged", "echo_env.environment:EchoEnvironment", auto.ENTRY_POINT_GROUP)
    monkeypatch.setattr(auto, "entry_points", lambda group: [fake] if group == auto.ENTRY_POINT_GROUP else [])
    assert resolve("plugged", search_paths=[]).kind == "entry_point"
    assert [s.name for s in discover_envs([])] == ["plugged"]


def test_discover_lists_entry_points_then_folders() -> None:
    found = discover_envs([REPO_ENVS])
    assert found[0] == EnvSource("entry_point", "echo", "echo_env.environment:EchoEnvironment")
    assert EnvSource("folder", "echo", str(REPO_ENVS / "echo")) in found


def test_a_folder_loads_its_env_typed_client_and_manifest_metadata(tmp_path: Path) -> None:
    loaded = load_env(EnvSource("folder", "echo", str(REPO_ENVS / "echo")))
    assert loaded.env_class is EchoEnvironment
    assert loaded.client_class.__name__ == "EchoClient"
    folder = make_env_folder(tmp_path, "renamed")
    meta = load_env(EnvSource("folder", "renamed", str(folder))).metadata
    assert (meta.name, meta.version) == ("renamed", "0.1.0")


def test_an_entry_point_loads_with_the_env_classes_metadata() -> None:
    loaded = load_env(resolve("echo", search_paths=[]))
    assert loaded.metadata.name == "echo"
    assert loaded.client_class.observation_type is EchoObservation


async def test_from_env_serves_an_installed_env_in_process() -> None:
    client = AutoEnv.from_env("echo")
    async with client:
        await client.reset()
        obs = await client.step({"message": "auto"})
    assert isinstance(obs, EchoObservation)
    assert obs.echoed_message == "auto"


async def test_from_env_connects_to_a_url() -> None:
    with LocalServer(create_app(EchoEnvironment)) as server:
        async with AutoEnv.from_env(server.base_url) as client:
            await client.reset()
            obs = await client.step({"message": "url"})
    assert obs.model_extra == {"echoed_message": "url", "message_length": 3}


def test_docker_sources_publish_to_loopback_and_wait_for_health(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Docker engine is not here yet; check what would be asked of it, up to the health wait."""
    calls: dict[str, object] = {}

    class FakeContainers:
        def run(self, image: str, **kwargs: object) -> object:
            calls.update(image=image, **kwargs)
            return type("C", (), {"stop": lambda self, timeout: calls.update(stopped=True)})()

    docker = pytest.importorskip("docker")
    monkeypatch.setattr(docker, "from_env", lambda: type("D", (), {"containers": FakeContainers()})())
    monkeypatch.setattr(auto, "wait_for_health", lambda url, timeout_s: calls.update(health=url))
    client = AutoEnv.from_env("docker:openenv-echo")
    (port_spec,) = calls["ports"].values()  # type: ignore[attr-defined]
    assert calls["image"] == "openenv-echo" and calls["detach"] is True
    assert port_spec[0] == "127.0.0.1"
    assert calls["health"] == client.base_url == f"http://127.0.0.1:{port_spec[1]}"
    token = calls["environment"]["OPENENV_TOKEN"]  # type: ignore[index]
    assert token and client.token == token  # the container's server requires it; this client sends it
