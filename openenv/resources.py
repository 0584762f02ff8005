"""Where openenv finds the files it ships, and the user's extra env folders.

Everything openenv reads besides code (harness specs and env folders, built-in tasks, templates, the
harness installer) is package data, found through `importlib.resources` from the imported `openenv`
package. A wheel, an editable install and a source checkout therefore resolve the same way, and no
module ever walks up to a repository root (which a wheel does not have).

In the source tree, `openenv/envs` is a link to the repository's `envs/`, so the env folders live where
their authors expect them and still ship inside the package (see `pyproject.toml`'s package data).

One environment variable adds folders: `OPENENV_ENVS_PATH`, a `os.pathsep`-separated list of folders
whose subfolders are env folders (an `openenv.yaml`, a harness `spec.yaml`, or both). They are searched
before the shipped envs, so a folder there can shadow a shipped env of the same name.

Caches that openenv writes (the tiny model, the harness CLIs) go under `cache_dir()`:
`$XDG_CACHE_HOME/openenv`, else `~/.cache/openenv`; each has its own override variable.
"""

from __future__ import annotations

import os
from importlib.resources import files
from pathlib import Path

__all__ = [
    "ENVS_PATH_VAR",
    "builtin_tasks_dir",
    "cache_dir",
    "env_dirs",
    "extra_env_dirs",
    "find_env_dir",
    "harness_installer",
    "package_path",
    "shipped_envs_dir",
]

ENVS_PATH_VAR = "OPENENV_ENVS_PATH"


def package_path(*parts: str) -> Path:
    """A file or folder shipped in the `openenv` package, e.g. `package_path("scaffold", "template")`.

    Raises:
        TypeError: openenv was imported from a zip file; its data must be on disk (env folders are
            imported from their folder, harness configs are copied into sandboxes).
    """
    root = files("openenv")
    if not isinstance(root, Path):
        raise TypeError(f"openenv's package data must be on disk, but the package is at {root!r}")
    return root.joinpath(*parts)


def shipped_envs_dir() -> Path:
    """The env folders shipped with openenv (echo and every harness): `openenv/envs/<name>/`."""
    return package_path("envs")


def extra_env_dirs() -> list[Path]:
    """The folders named by `$OPENENV_ENVS_PATH`, in order (empty entries ignored)."""
    configured = os.environ.get(ENVS_PATH_VAR, "")
    return [Path(p).expanduser() for p in configured.split(os.pathsep) if p]


def env_dirs() -> list[Path]:
    """Folders whose subfolders are env folders: `$OPENENV_ENVS_PATH` first, then the shipped ones."""
    paths = [*extra_env_dirs(), shipped_envs_dir()]
    return list(dict.fromkeys(p.resolve() for p in paths))


def find_env_dir(name: str, marker: str, search: list[Path] | None = None) -> Path | None:
    """The first `<dir>/<name>` holding `marker` (e.g. `spec.yaml`) over `search` (default: `env_dirs()`)."""
    if not name or name.startswith(".") or "/" in name or os.sep in name:
        return None  # a name, not a path: never a way out of the search folders
    for root in env_dirs() if search is None else search:
        if (root / name / marker).is_file():
            return root / name
    return None


def builtin_tasks_dir() -> Path:
    """The built-in task set's folder, one task folder per id."""
    return package_path("harness", "tasks", "builtin")


def harness_installer() -> Path:
    """The shell script that installs pinned harness CLIs (the same one CI and developers run)."""
    return package_path("harness", "install_harnesses.sh")


def cache_dir() -> Path:
    """Where openenv caches what it builds or downloads: `$XDG_CACHE_HOME/openenv` or `~/.cache/openenv`."""
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "openenv"
