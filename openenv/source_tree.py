"""An installable copy of the running openenv: what env images and Spaces ship as `openenv-src/`.

Both `harness.env_image` (an env's image) and `publish` (a Space folder) ship it; it lives here, below
them both, so neither imports the other.
"""

from __future__ import annotations

import json
import shutil
from importlib.resources import files
from pathlib import Path

from openenv.distribution import NAME, installed, requirements
from openenv.resources import package_path

__all__ = ["write_source_tree"]

# openenv's own tree: never dotfiles, caches, build leftovers or a harness's node_modules.
_IGNORE = shutil.ignore_patterns(".*", "__pycache__", "*.pyc", "*.egg-info", "node_modules")


def write_source_tree(dest: Path) -> Path:
    """Write the running openenv's packages (links followed, so the shipped env folders are real files)
    into `dest`, which must not exist yet, with a pyproject.toml carrying the installed version, core
    dependencies, console script and entry points; returns `dest`."""
    dest.mkdir(parents=True)
    shutil.copytree(package_path(), dest / "openenv", ignore=_IGNORE)
    shutil.copytree(str(files("echo_env")), dest / "echo_env", ignore=_IGNORE)
    dist = installed()
    groups: dict[str, list[str]] = {}
    for ep in dist.entry_points:
        groups.setdefault(ep.group, []).append(f"{json.dumps(ep.name)} = {json.dumps(ep.value)}")
    lines = [
        "[build-system]",
        'requires = ["setuptools>=68"]',
        'build-backend = "setuptools.build_meta"',
        "",
        "[project]",
        f"name = {json.dumps(NAME)}",
        f"version = {json.dumps(dist.version)}",
        'requires-python = ">=3.11"',
        "dependencies = [",
        *(f"  {json.dumps(req)}," for req in requirements()),
        "]",
        "",
    ]
    for group, entries in groups.items():
        table = "[project.scripts]" if group == "console_scripts" else f'[project.entry-points."{group}"]'
        lines += [table, *entries, ""]
    lines += [
        "[tool.setuptools.packages.find]",
        'include = ["openenv*", "echo_env*"]',
        "namespaces = false",
        "",
        "[tool.setuptools.package-data]",
        '"*" = ["**/*"]',
        "",
    ]
    (dest / "pyproject.toml").write_text("\n".join(lines))
    return dest
