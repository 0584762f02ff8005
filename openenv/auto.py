"""`AutoEnv.from_env(name)`: find an environment by name and hand back a client connected to it.

A name resolves, first match wins, to:
  1. an installed env: an entry point `name` in the group `openenv.envs` (value: `module:EnvClass`);
  2. an env folder: a path, or `<dir>/<name>` for each dir in `$OPENENV_ENVS_PATH` and then the env
     folders shipped with openenv (`openenv.resources.env_dirs`), holding an `openenv.yaml`;
  3. an `http://` or `https://` URL of a running env server;
  4. `docker:IMAGE`: a container started from IMAGE, its port 8000 published on 127.0.0.1;
  5. a Hugging Face Space id `owner/name`: the Hub (`$HF_ENDPOINT`, default huggingface.co) is asked
     where the Space is served (its `host`, normally `https://owner-name.hf.space`) and whether it runs.
Installed envs and folders are served in-process by a `LocalServer` that the client stops on close; a
folder whose manifest names an ASGI `app` (made by the reference OpenEnv's `openenv init`) runs in a
child interpreter instead (`openenv.app_runner`). Either way the client reads the server's protocol,
ours or the reference's.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Literal

from openenv.client import EnvClient
from openenv.core.auth import TOKEN_ENV, forget_token, generate_token, remember_token
from openenv.core.environment import Environment, EnvMetadata
from openenv.core.net import free_port, wait_for_health
from openenv.errors import NotFound, TransportError
from openenv.manifest import MANIFEST_FILE, Manifest, import_object
from openenv.resources import env_dirs

__all__ = [
    "ENTRY_POINT_GROUP",
    "AutoEnv",
    "EnvSource",
    "LoadedEnv",
    "client_class_for",
    "discover_envs",
    "hf_space_url",
    "load_env",
    "resolve",
    "space_url",
    "start_container",
]

ENTRY_POINT_GROUP = "openenv.envs"
SourceKind = Literal["entry_point", "folder", "url", "docker", "hf_space"]
_SPACE_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*$")
_CONTAINER_PORT = 8000


@dataclass(frozen=True)
class EnvSource:
    """Where a name resolved to: `target` is an entry-point value, a folder, a URL or an image."""

    kind: SourceKind
    name: str
    target: str


def hf_space_url(space_id: str) -> str:
    """The URL a Space is served at: `owner-name`, lowercased, with `_` and `.` turned into `-`."""
    if not _SPACE_ID.match(space_id):
        raise ValueError(f"expected a Space id 'owner/name', got {space_id!r}")
    owner, name = space_id.split("/")
    subdomain = re.sub(r"[_.]", "-", f"{owner}-{name}").lower()
    return f"https://{subdomain}.hf.space"


def space_url(space_id: str, *, endpoint: str | None = None) -> str:
    """Where the Hub says Space `space_id` is served; refuses a Space that cannot answer.

    Args:
        space_id: `owner/name`.
        endpoint: the Hub's URL; default `$HF_ENDPOINT` (read now, not at import), else huggingface.co.
            Without `huggingface_hub`, or in its offline mode (`HF_HUB_OFFLINE=1`), the Hub is not asked
            and the URL is derived from the id (`hf_space_url`).

    Raises:
        NotFound: the Hub has no such Space (or it is private to someone else).
        TransportError: the Hub cannot be reached, or the Space is stopped or broken (a build or runtime
            error); a sleeping or starting Space is returned, since a request wakes it.
    """
    try:
        import huggingface_hub.constants
        from huggingface_hub import HfApi
        from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError
    except ImportError:
        return hf_space_url(space_id)
    if huggingface_hub.constants.HF_HUB_OFFLINE:
        return hf_space_url(space_id)
    api = HfApi(endpoint=endpoint or os.environ.get("HF_ENDPOINT") or None)
    try:
        info = api.space_info(space_id)
    except RepositoryNotFoundError:
        raise NotFound(f"the Hub at {api.endpoint} has no Space {space_id!r}", name=space_id) from None
    except (HfHubHTTPError, OSError, ValueError) as exc:
        raise TransportError(
            f"cannot look up Space {space_id!r} on the Hub at {api.endpoint}: {exc}"
        ) from None
    stage = info.runtime.stage if info.runtime is not None else None
    if stage in _DEAD_STAGES:
        raise TransportError(
            f"Space {space_id!r} is {stage} on the Hub; it will not answer until it is "
            "fixed or restarted there",
            stage=stage,
        )
    return (info.host or hf_space_url(space_id)).rstrip("/")


# Space runtime stages in which no request reaches the app (SLEEPING, BUILDING, APP_STARTING will).
_DEAD_STAGES = frozenset(
    {"NO_APP_FILE", "CONFIG_ERROR", "BUILD_ERROR", "RUNTIME_ERROR", "STOPPED", "PAUSED", "DELETING"}
)


def discover_envs(search_paths: list[Path] | None = None) -> list[EnvSource]:
    """Every env this process can serve by name: installed entry points, then env folders."""
    found = [EnvSource("entry_point", ep.name, ep.value) for ep in entry_points(group=ENTRY_POINT_GROUP)]
    for root in search_paths if search_paths is not None else env_dirs():
        if root.is_dir():
            found += [
                EnvSource("folder", d.name, str(d))
                for d in sorted(root.iterdir())
                if (d / MANIFEST_FILE).is_file()
            ]
    return found


def resolve(name: str, *, search_paths: list[Path] | None = None) -> EnvSource:
    """Where `name` points, by the order in this module's docstring.

    Raises:
        NotFound: nothing matches; the message lists the envs that are available.
    """
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == name:
            return EnvSource("entry_point", name, ep.value)
    as_path = Path(name).expanduser()
    if (as_path / MANIFEST_FILE).is_file():
        return EnvSource("folder", name, str(as_path.resolve()))
    for root in search_paths if search_paths is not None else env_dirs():
        if (root / name / MANIFEST_FILE).is_file():
            return EnvSource("folder", name, str((root / name).resolve()))
    if name.startswith(("http://", "https://")):
        return EnvSource("url", name, name.rstrip("/"))
    if name.startswith("docker:"):
        return EnvSource("docker", name, name.removeprefix("docker:"))
    if _SPACE_ID.match(name):
        return EnvSource("hf_space", name, hf_space_url(name))
    known = ", ".join(sorted({s.name for s in discover_envs(search_paths)})) or "none"
    raise NotFound(
        f"no environment named {name!r}: not an installed env, an env folder, a URL, docker:IMAGE "
        f"or a Space id owner/name (known envs: {known})",
        name=name,
    )


@dataclass(frozen=True)
class LoadedEnv:
    """An installed env or env folder, imported: what a server needs to serve it, and its typed client."""

    env_class: type[Environment[Any, Any, Any]]
    client_class: type[EnvClient[Any, Any, Any]]
    metadata: EnvMetadata


def load_env(source: EnvSource) -> LoadedEnv:
    """Import the env class (and typed client) of an installed env or env folder.

    Raises:
        NotFound / BadRequest: the manifest or a class it names cannot be loaded.
        ValueError: the source is a URL, image or Space, which has no class here.
    """
    if source.kind == "entry_point":
        env_cls = import_object(source.target)
        return LoadedEnv(env_cls, client_class_for(env_cls), env_cls.metadata())
    if source.kind == "folder":
        manifest, folder = Manifest.load(source.target)
        env_cls = manifest.load_environment(folder)
        client_cls = manifest.load_client(folder) or client_class_for(env_cls)
        meta = EnvMetadata(name=manifest.name, description=manifest.description, version=manifest.version)
        return LoadedEnv(env_cls, client_cls, meta)
    raise ValueError(f"{source.kind} sources are served elsewhere; there is no class to load")


def client_class_for(env_cls: type[Environment[Any, Any, Any]]) -> type[EnvClient[Any, Any, Any]]:
    """An `EnvClient` subclass typed by the env class's own models."""
    attrs = {
        "action_type": env_cls.action_type,
        "observation_type": env_cls.observation_type,
        "state_type": env_cls.state_type,
    }
    return type(f"{env_cls.__name__}Client", (EnvClient,), attrs)


class AutoEnv:
    """Entry point for "give me env X": `AutoEnv.from_env("echo")`, a URL, `docker:IMAGE` or a Space."""

    @staticmethod
    def from_env(name: str, *, python: str | None = None, **client_kwargs: Any) -> EnvClient[Any, Any, Any]:
        """Resolve `name` and return an (unconnected) client; closing the client stops what it started.

        Args:
            name: An env name, env folder, URL, `docker:IMAGE` or Space id (see the module docstring).
            python: For a folder that names an ASGI `app` (a reference env): the interpreter to run it
                with (default: see `openenv.app_runner.find_python`).
            **client_kwargs: Passed to the `EnvClient` constructor (timeouts).

        Raises:
            NotFound: the name does not resolve (or the Hub has no such Space).
            TransportError: a container, app or Space did not become reachable.
        """
        source = resolve(name)
        if source.kind == "folder":
            manifest, folder = Manifest.load(source.target)
            if manifest.is_app:
                from openenv.app_runner import AppProcess, find_python

                app = AppProcess(folder, manifest, find_python(folder, python)).start()
                return EnvClient(app.base_url, on_close=app.stop, **client_kwargs)
        if source.kind in ("entry_point", "folder"):
            from openenv.server import LocalServer, create_app

            loaded = load_env(source)
            server = LocalServer(create_app(loaded.env_class, metadata=loaded.metadata)).start()
            return loaded.client_class(server.base_url, on_close=server.stop, **client_kwargs)
        if source.kind == "docker":
            url, stop = start_container(source.target)
            return EnvClient(url, on_close=stop, **client_kwargs)
        if source.kind == "hf_space":
            return EnvClient(space_url(name), **client_kwargs)
        return EnvClient(source.target, **client_kwargs)


def start_container(image: str, *, timeout_s: float = 120.0) -> tuple[str, Any]:
    """Run `image` detached with its port 8000 on a free 127.0.0.1 port; wait until `/health` answers."""
    import docker  # the `docker` extra

    port = free_port()
    token = generate_token()  # the container's server requires it; this process's clients find it
    container = docker.from_env().containers.run(
        image,
        detach=True,
        remove=True,
        ports={f"{_CONTAINER_PORT}/tcp": ("127.0.0.1", port)},
        environment={TOKEN_ENV: token},
    )
    url = f"http://127.0.0.1:{port}"
    remember_token(url, token)

    def stop() -> None:
        forget_token(url)
        try:
            container.stop(timeout=5)
        except docker.errors.APIError:
            pass  # already gone (it was started with remove=True)

    try:
        wait_for_health(url, timeout_s=timeout_s)
    except TransportError:
        logs = container.logs(tail=20).decode(errors="replace")
        stop()
        raise TransportError(
            f"container {image} did not become healthy on {url}; last log lines:\n{logs}"
        ) from None
    return url, stop
