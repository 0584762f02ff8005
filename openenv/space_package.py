"""The client package at a Space's root: what the reference OpenEnv's `AutoEnv.from_env("owner/name")` installs.

The reference (`openenv==0.10.0`, Hugging Face's, `openenv/auto/auto_env.py` and `_discovery.py`) loads a
Space in four steps, and each one fixes a name here:

1. `GET https://owner-name.hf.space/health`, no headers: a 200 means "the Space runs" (our server answers
   `/health` without the token; a private Space cannot answer it, see docs/security.md);
2. `pip install git+https://huggingface.co/spaces/owner/name`: the Space's git repository must be an
   installable project at its root (the `pyproject.toml` this module writes);
3. discovery over installed distributions named `openenv-<x>`: module `<x>` (the name after `openenv-`,
   `-` read as `_`) holding `<x>/openenv.yaml`, whose `name` (with `_env` appended when missing) gives the
   env key `name.replace("_env", "")`; the client is `<x>.client.<Key>Env`, the key's `_`-separated words
   capitalised;
4. `<Key>Env(base_url="https://owner-name.hf.space", provider=None, **kwargs)`: `kwargs` are what the caller
   gave `from_env`.

`<x>` is the Space's repository name with `-` as `_` and `_env` appended, which is the reference's own
guess (`_ensure_package_from_hub`): with it, a second `from_env` in a new process finds the package
already installed instead of installing it again. The client is the reference's `GenericEnvClient` (dict
actions and observations) with our bearer token attached from `token=`, `headers=` or `$OPENENV_TOKEN`.

The package declares no dependency: it runs where `AutoEnv` runs, next to the reference, and both the
reference and openenv-harness import as `openenv`, so a declared `openenv` would have pip replace one with
the other in a venv that holds ours.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from openenv.manifest import Manifest

__all__ = ["SpacePackage", "space_package", "write_space_package"]


@dataclass(frozen=True)
class SpacePackage:
    """The names the reference's discovery derives, all from the Space's repository name."""

    module: str  # `<x>`: the import package, and the manifest `name`
    distribution: str  # `openenv-<x>`
    client_class: str  # `<Key>Env`, as the reference infers it from the manifest name
    repo_id: str  # `owner/name`, or `<owner>/<env>` when the Space id is not known yet (a dry run)


def space_package(repo_id: str | None, env_name: str) -> SpacePackage:
    """The package a Space `repo_id` (default: one named after the env) carries for the reference's `AutoEnv`.

    Names the reference would guess differently (upper case, dots) are made lower case with `_`; the
    reference still finds such a package on its first install (it compares the installed environments
    before and after), but only a name it guesses itself is found again without reinstalling.
    """
    name = repo_id.rsplit("/", 1)[-1] if repo_id else env_name
    module = re.sub(r"[^a-z0-9_]", "_", name.lower())
    if module[:1].isdigit():
        module = f"space_{module}"
    if not module.endswith("_env"):
        module = f"{module}_env"
    key = module.replace("_env", "")  # the reference's rule (every occurrence, not only the suffix)
    client_class = "".join(word.capitalize() for word in key.split("_")) + "Env"
    return SpacePackage(
        module=module,
        distribution=f"openenv-{module}",
        client_class=client_class,
        repo_id=repo_id or f"<owner>/{env_name}",
    )


_PYPROJECT = """\
# Written by `openenv push`. The Space runs its Dockerfile; this file makes the Space's git repository
# installable, which is what the reference OpenEnv's AutoEnv.from_env("{repo_id}") does
# (pip install git+https://huggingface.co/spaces/{repo_id}): it installs the client package {module}/ only.
[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "{distribution}"
version = "{version}"
description = {description}
requires-python = ">=3.10"
# None declared: the client runs next to the reference OpenEnv (`openenv` on PyPI), which AutoEnv comes from;
# openenv-harness imports as `openenv` too, and pip would replace one with the other.
dependencies = []

[tool.setuptools]
packages = ["{module}"]
include-package-data = false

[tool.setuptools.package-data]
{module} = ["openenv.yaml"]
"""

_CLIENT = '''\
"""Client of the `{env}` env served by the Space `{repo_id}`, for the reference OpenEnv (`pip install openenv`).

Written by `openenv push` (openenv-harness). `AutoEnv.from_env("{repo_id}")` installs this package and returns a
`{client_class}` connected to the Space; actions and observations are plain dicts (the env's JSON; its schemas
at `GET /schema`).

The Space's server wants a bearer token on everything but `GET /health` and the API docs: give `token=`, or
`headers={{"Authorization": "Bearer ..."}}`, or set `OPENENV_TOKEN` (the value of the Space's secret of that
name), e.g. `AutoEnv.from_env("{repo_id}", token=...)`.
"""

from __future__ import annotations

import os
from typing import Any

try:
    from openenv.core.generic_client import GenericEnvClient
except ImportError as exc:  # openenv-harness (ours) imports as `openenv` too, without this module
    raise ImportError(
        "{distribution} is a client for the reference OpenEnv (`pip install openenv`, Hugging Face's); "
        "with openenv-harness, connect with `openenv.AutoEnv.from_env(\\"{repo_id}\\")` instead"
    ) from exc

__all__ = ["{client_class}", "SPACE_ID", "TOKEN_ENV"]

SPACE_ID = "{repo_id}"
TOKEN_ENV = "OPENENV_TOKEN"


class {client_class}(GenericEnvClient):
    """The reference's `GenericEnvClient` that sends the Space's token (`token=`, else `${{OPENENV_TOKEN}}`)
    unless `headers` already carry an `Authorization`."""

    def __init__(self, base_url: str | None = None, *, token: str | None = None,
                 headers: dict[str, str] | None = None, **kwargs: Any) -> None:
        sent = dict(headers or {{}})
        if not any(name.lower() == "authorization" for name in sent):
            token = token or os.environ.get(TOKEN_ENV)
            if token:
                sent["Authorization"] = f"Bearer {{token}}"
        super().__init__(base_url=base_url, headers=sent or None, **kwargs)
'''


def write_space_package(dest: Path, manifest: Manifest, repo_id: str | None, *, port: int) -> SpacePackage:
    """Write `pyproject.toml` and `<x>/` (`__init__.py`, `openenv.yaml`, `client.py`) into the Space folder `dest`."""
    package = space_package(repo_id, manifest.name)
    folder = dest / package.module
    folder.mkdir(parents=True)
    description = (manifest.description or manifest.name).strip()
    (dest / "pyproject.toml").write_text(
        _PYPROJECT.format(
            repo_id=package.repo_id,
            module=package.module,
            distribution=package.distribution,
            version=manifest.version,
            description=_toml_string(f"Client of the {manifest.name} env's Space"),
        )
    )
    (folder / "__init__.py").write_text(
        f'"""The `{manifest.name}` env\'s Space client for the reference OpenEnv (see client.py)."""\n\n'
        f'from .client import {package.client_class}\n\n__all__ = ["{package.client_class}"]\n'
    )
    (folder / "openenv.yaml").write_text(
        "# Read by the reference OpenEnv's discovery (AutoEnv): `name` gives the client class "
        f"{package.client_class}.\n"
        + yaml.safe_dump(
            {
                "spec_version": 1,
                "name": package.module,
                "type": "space",
                "runtime": "fastapi",
                "port": port,
                "description": description,
                "space": package.repo_id,
                "env": manifest.name,
            },
            sort_keys=False,
        )
    )
    (folder / "client.py").write_text(
        _CLIENT.format(
            env=manifest.name,
            repo_id=package.repo_id,
            client_class=package.client_class,
            distribution=package.distribution,
        )
    )
    return package


def _toml_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
