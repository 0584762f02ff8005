"""The harness catalog: which harnesses exist (one `envs/<name>/spec.yaml` each) and where they live."""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path

from openenv.errors import NotFound
from openenv.harness.spec import HarnessSpec, load_spec

__all__ = ["envs_root", "get_spec", "harness_names", "repo_root"]


def repo_root() -> Path:
    return Path(__file__).resolve().parents[2]


def envs_root() -> Path:
    """The folder holding `envs/<name>/`; `OPENENV_ENVS_DIR` overrides the repository's own."""
    return Path(os.environ.get("OPENENV_ENVS_DIR") or repo_root() / "envs")


def harness_names() -> list[str]:
    """Names of every folder under envs/ that holds a harness spec, sorted."""
    return sorted(p.parent.name for p in envs_root().glob("*/spec.yaml"))


@cache
def _load(path: Path) -> HarnessSpec:
    return load_spec(path)


def get_spec(name: str) -> HarnessSpec:
    """Return the validated spec of harness `name`.

    Raises:
        NotFound: there is no `envs/<name>/spec.yaml`; the message lists the known harnesses.
    """
    path = envs_root() / name / "spec.yaml"
    if not path.is_file():
        raise NotFound(f"unknown harness {name!r}; known harnesses: {', '.join(harness_names())}")
    return _load(path)
