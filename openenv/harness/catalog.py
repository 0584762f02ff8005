"""The harness catalog: which harnesses exist (one `<env folder>/spec.yaml` each) and where they live.

Harness folders are the shipped env folders plus those under `$OPENENV_ENVS_PATH` (`openenv.resources`);
a folder there shadows a shipped harness of the same name.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, TypeAdapter

from openenv.errors import NotFound
from openenv.harness.spec import HarnessSpec, load_spec
from openenv.resources import env_dirs, find_env_dir, shipped_envs_dir

__all__ = [
    "SPEC_FILE",
    "UnsupportedHarness",
    "get_spec",
    "harness_dir",
    "harness_names",
    "reload_specs",
    "unsupported_harnesses",
]

SPEC_FILE = "spec.yaml"
UNSUPPORTED_FILE = "unsupported.yaml"


class UnsupportedHarness(BaseModel):
    """A harness that was tried and cannot run here, with the reason observed (envs/unsupported.yaml)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    package: str
    reason: str


def harness_names() -> list[str]:
    """Names of every env folder that holds a harness spec, sorted."""
    return sorted({p.parent.name for root in env_dirs() for p in root.glob(f"*/{SPEC_FILE}")})


def harness_dir(name: str) -> Path:
    """The env folder of harness `name` (its spec, Dockerfile, README and seam).

    Raises:
        NotFound: no env folder of that name holds a `spec.yaml`; the message lists the known harnesses.
    """
    folder = find_env_dir(name, SPEC_FILE)
    if folder is None:
        raise NotFound(f"unknown harness {name!r}; known harnesses: {', '.join(harness_names())}")
    return folder


@cache
def _load(path: Path) -> HarnessSpec:
    return load_spec(path)


def get_spec(name: str) -> HarnessSpec:
    """Return the validated spec of harness `name`.

    Raises:
        NotFound: there is no such harness; the message lists the known harnesses.
    """
    return _load(harness_dir(name) / SPEC_FILE)


def reload_specs() -> None:
    """Forget the specs read so far: the next `get_spec` reads each file again (after a pin moved)."""
    _load.cache_clear()


def unsupported_harnesses() -> list[UnsupportedHarness]:
    """The harnesses tried that cannot run here, from the shipped `envs/unsupported.yaml`."""
    path = shipped_envs_dir() / UNSUPPORTED_FILE
    rows = yaml.safe_load(path.read_text()) if path.is_file() else []
    return TypeAdapter(list[UnsupportedHarness]).validate_python(rows or [])
