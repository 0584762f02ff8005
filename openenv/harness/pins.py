"""Harness versions besides the pin: `NAME@VERSION` targets, scratch installs, and moving a pin.

`openenv harness check` qualifies a version before anyone pins it, so it installs that version into a
scratch cache of its own (never the pinned cache other episodes run from), with the same installer as
`openenv harness install` (`scripts/install_harnesses.sh NAME@VERSION`). A pin lives in two places that a
test keeps equal: the harness's `spec.yaml` (`install.version`) and the installer's PINS table;
`write_pin` moves both.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from openenv.errors import BadRequest, EnvError
from openenv.harness.catalog import SPEC_FILE, get_spec, harness_dir, reload_specs
from openenv.harness.install import cache_root
from openenv.harness.spec import HarnessSpec
from openenv.resources import harness_installer

__all__ = ["install_version", "parse_target", "scratch_cache", "spec_at", "using_cache", "write_pin"]

_VERSION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.+_-]*$")
# Runtimes the installer puts beside the harness prefixes (Node 22, copies of Python); a scratch cache
# gets hard links of the pinned cache's, so a check does not download or copy them again.
_RUNTIMES = ("node22", "python")


def parse_target(target: str) -> tuple[HarnessSpec, str]:
    """`NAME` or `NAME@VERSION` -> the harness's spec and the version to check (the pin when none is given).

    Raises:
        NotFound: no such harness (the message lists the known ones).
        BadRequest: the version is not a plain version string.
    """
    name, _, version = target.partition("@")
    spec = get_spec(name)
    version = version or spec.install.version
    if not _VERSION.match(version):
        raise BadRequest(f"{version!r} is not a version: expected e.g. {name}@{spec.install.version}")
    return spec, version


def spec_at(spec: HarnessSpec, version: str) -> HarnessSpec:
    """`spec` with `version` as its install version (install checks and launches then expect that version)."""
    return spec.model_copy(update={"install": spec.install.model_copy(update={"version": version})})


def scratch_cache(name: str, version: str) -> Path:
    """Where `harness check` installs `name@version`: beside the pinned cache, never in it."""
    return cache_root().parent / "harness-check" / f"{name}@{version}"


@contextmanager
def using_cache(cache: Path) -> Iterator[Path]:
    """Point every install lookup and sandbox mount (`OPENENV_HARNESS_CACHE`) at `cache` while inside."""
    before = os.environ.get("OPENENV_HARNESS_CACHE")
    os.environ["OPENENV_HARNESS_CACHE"] = str(cache)
    try:
        yield cache
    finally:
        if before is None:
            os.environ.pop("OPENENV_HARNESS_CACHE", None)
        else:
            os.environ["OPENENV_HARNESS_CACHE"] = before


def _seed_runtimes(pinned: Path, cache: Path) -> None:
    """Hard-link the pinned cache's runtimes into `cache` (same file system; else the installer makes them).
    Links, not symlinks: a Docker sandbox mounts only the scratch cache."""
    for runtime in _RUNTIMES:
        source, dest = pinned / runtime, cache / runtime
        if source.is_dir() and not dest.exists():
            proc = subprocess.run(["cp", "-al", str(source), str(dest)], capture_output=True, check=False)
            if proc.returncode != 0:
                shutil.rmtree(dest, ignore_errors=True)


def install_version(
    spec: HarnessSpec, version: str, cache: Path, log: Path, *, timeout_s: float = 900
) -> float:
    """Install `spec.name@version` into `cache` (a no-op when it is there already); returns the seconds taken.

    The installer's output goes to `log`, the evidence of what was fetched.

    Raises:
        EnvError: the installer failed or ran past `timeout_s`; the message holds its last lines.
    """
    pinned = cache_root()
    cache.mkdir(parents=True, exist_ok=True)
    if pinned.resolve() != cache.resolve():
        _seed_runtimes(pinned, cache)
    env = {**os.environ, "OPENENV_HARNESS_CACHE": str(cache)}
    start = time.monotonic()
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w") as out:
        try:
            proc = subprocess.run(
                ["bash", str(harness_installer()), f"{spec.name}@{version}"],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                check=False,
                timeout=timeout_s,
            )
        except subprocess.TimeoutExpired:
            raise EnvError(
                f"installing {spec.name}@{version} ran past {timeout_s:.0f} s (log: {log})"
            ) from None
    if proc.returncode != 0:
        tail = " | ".join(log.read_text(errors="replace").strip().splitlines()[-6:])
        raise EnvError(f"installing {spec.install.package}@{version} failed (exit {proc.returncode}): {tail}")
    return time.monotonic() - start


def write_pin(name: str, version: str, *, installer: Path | None = None) -> list[Path]:
    """Make `version` the pin of harness `name`: its spec.yaml and the installer's PINS row (`installer`,
    default the shipped script); returns the files changed (none when it is the pin already).

    Raises:
        BadRequest: `version` is not a plain version string.
        EnvError: a file does not hold the pin where it should (edited by hand?); nothing was written.
    """
    if not _VERSION.match(version):
        raise BadRequest(f"{version!r} is not a version")
    spec = get_spec(name)
    spec_file = harness_dir(name) / SPEC_FILE
    installer = (installer or harness_installer()).resolve()
    old = re.escape(spec.install.version)
    edits = [
        (spec_file, re.compile(r"(\binstall:.*?\bversion:\s*[\"']?)" + old + r"([\"']?)", re.S)),
        (
            installer,
            re.compile(
                r"(?m)(^"
                + re.escape(name)
                + r"\s+\S+\s+"
                + re.escape(spec.install.package)
                + r"\s+)"
                + old
                + r"(\s)"
            ),
        ),
    ]
    new_texts: list[tuple[Path, str]] = []
    for path, pattern in edits:
        text = path.read_text()
        updated, count = pattern.subn(lambda m: m.group(1) + version + m.group(2), text, count=1)
        if count != 1:
            raise EnvError(
                f"{path} does not name {name}'s pin {spec.install.version} where expected; nothing written"
            )
        new_texts.append((path, updated))
    if version == spec.install.version:
        return []
    for path, text in new_texts:
        path.write_text(text)
    reload_specs()  # the next get_spec reads the new pin
    return [path for path, _ in new_texts]
