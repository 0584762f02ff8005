"""Harness installs: where each pinned CLI lives under the harness cache and how to install it.

The install itself is `scripts/install_harnesses.sh`, shipped in the package as
`openenv/harness/install_harnesses.sh` (one script for CI, developers and this module), so a shell-only
machine and `openenv harness install` end in the same prefixes.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from openenv.errors import EnvError
from openenv.harness.spec import HarnessSpec
from openenv.resources import cache_dir, harness_installer

__all__ = [
    "DOCKER_COMMANDS",
    "InstallStatus",
    "cache_root",
    "docker_blocker",
    "install",
    "install_status",
    "node_bin_dir",
    "prefix",
    "resolve_bin",
]

# Commands a harness runs beside its own install that a Docker sandbox's image may lack; the install
# script unpacks them into the harness's prefix (its PORTABLE_DEBS table, which a test keeps in step).
DOCKER_COMMANDS: dict[str, tuple[str, ...]] = {"terminus-2": ("tmux",), "openhands": ("tmux",)}
# Interpreters a venv may run on that every sandbox image has at the same path (Debian's python3).
_IMAGE_PYTHON_HOMES = ("/usr/bin",)


class InstallStatus(BaseModel):
    """Whether a harness's pinned version is installed, and where its executable is."""

    model_config = ConfigDict(extra="forbid")

    name: str
    pinned: str
    installed: str | None
    executable: Path | None

    @property
    def ready(self) -> bool:
        return self.installed == self.pinned and self.executable is not None


def cache_root() -> Path:
    """`OPENENV_HARNESS_CACHE`; else, for root, `/var/cache/openenv/harnesses`; else `harnesses/` under
    openenv's cache folder (`~/.cache/openenv`).

    Not under root's home: Docker sandboxes mount the installs at the same path and run them as an
    unprivileged user, who cannot enter /root. `scripts/install_harnesses.sh` picks the same default.
    """
    configured = os.environ.get("OPENENV_HARNESS_CACHE")
    if configured:
        return Path(configured)
    return Path("/var/cache/openenv/harnesses") if os.geteuid() == 0 else cache_dir() / "harnesses"


def prefix(spec: HarnessSpec) -> Path:
    return cache_root() / spec.name


def node_bin_dir(spec: HarnessSpec) -> Path | None:
    """The Node bin folder to put first on PATH, for harnesses that need a newer Node than the system's."""
    return cache_root() / spec.install.node_dir / "bin" if spec.install.node_dir else None


def resolve_bin(spec: HarnessSpec) -> Path | None:
    path = prefix(spec) / "bin" / spec.install.bin
    return path if path.exists() else None


def _installed_version(spec: HarnessSpec) -> str | None:
    if spec.install.method == "npm":
        manifest = prefix(spec) / "lib" / "node_modules" / spec.install.package / "package.json"
        return json.loads(manifest.read_text()).get("version") if manifest.is_file() else None
    dist = f"{spec.install.package.replace('-', '_')}-"
    for site in prefix(spec).glob("lib/python*/site-packages"):
        for info in site.glob(f"{dist}*.dist-info"):
            return info.name.removeprefix(dist).removesuffix(".dist-info")
    return None


def install_status(spec: HarnessSpec) -> InstallStatus:
    return InstallStatus(
        name=spec.name,
        pinned=spec.install.version,
        installed=_installed_version(spec),
        executable=resolve_bin(spec),
    )


def _venv_home(spec: HarnessSpec) -> Path | None:
    """The `home` of a pip harness's venv (the folder of the interpreter it runs on), from pyvenv.cfg."""
    config = prefix(spec) / "pyvenv.cfg"
    if not config.is_file():
        return None
    for line in config.read_text().splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "home":
            return Path(value.strip())
    return None


def docker_blocker(spec: HarnessSpec) -> str | None:
    """Why this install cannot run in a Docker sandbox, or None when it can.

    A Docker sandbox mounts the harness cache (at its own path) and nothing else of this machine. A pip
    harness whose venv runs on an interpreter outside the cache (a venv made by an older install script,
    on pyenv's Python under /root) would end at once in the container; so would terminus-2 without its
    own tmux. `openenv harness install NAME` fixes both in place (no reinstall).
    """
    fix = f"run `openenv harness install {spec.name}` to make it runnable there"
    if spec.install.method == "pip":
        home = _venv_home(spec)
        root = cache_root().resolve()
        if (
            home is not None
            and str(home) not in _IMAGE_PYTHON_HOMES
            and not home.resolve().is_relative_to(root)
        ):
            return f"its venv runs on {home}, which Docker sandboxes do not mount; {fix}"
    for command in DOCKER_COMMANDS.get(spec.name, ()):
        if not (prefix(spec) / "bin" / command).exists():
            return f"it needs {command}, which sandbox images lack and its install has not unpacked; {fix}"
    return None


def install(names: list[str], *, quiet: bool = False) -> None:
    """Install harnesses (or `["all"]`) with the pinned versions; a no-op for those already installed.

    Raises:
        EnvError: the install script failed; its stderr tail is in the message.
    """
    script = harness_installer()
    env = {**os.environ, "OPENENV_HARNESS_CACHE": str(cache_root())}
    proc = subprocess.run(
        ["bash", str(script), *names], env=env, capture_output=quiet, text=True, check=False
    )
    if proc.returncode != 0:
        tail = (proc.stderr or "")[-2000:]
        raise EnvError(f"installing {' '.join(names)} failed (exit {proc.returncode}). {tail}")
