"""The newest version each harness's registry offers, against its pin (`openenv harness outdated`).

One light query per harness, through the registry's own client so the user's registry settings hold
(`npm view PACKAGE version` reads `npm_config_registry` / .npmrc; `pip index versions PACKAGE` reads
`PIP_INDEX_URL` / pip.conf), all at once in threads, each with a timeout. A registry that cannot be
reached is a row that says so, never a hang or a crash.
"""

from __future__ import annotations

import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Literal

from pydantic import BaseModel, ConfigDict

from openenv.harness.spec import HarnessSpec

__all__ = ["LatestVersion", "latest_version", "latest_versions"]

Status = Literal["current", "outdated", "ahead", "unreachable"]
_PIP_FIRST_LINE = re.compile(r"^\S+ \(([^)]+)\)")


class LatestVersion(BaseModel):
    """One harness's pin and the newest version its registry offers (or why the registry gave none)."""

    model_config = ConfigDict(extra="forbid")

    name: str
    package: str
    registry: Literal["npm", "pypi"]
    pinned: str
    latest: str | None
    status: Status
    error: str | None = None


def _version_key(version: str) -> tuple[tuple[int, int | str], ...]:
    """Numbers compare as numbers (0.10 > 0.9); a pre-release tail sorts below its release."""
    release, _, pre = version.partition("-")
    parts: list[tuple[int, int | str]] = [
        (1, int(p)) if p.isdigit() else (0, p) for p in re.split(r"[.+]", release)
    ]
    return (*parts, (0, pre) if pre else (1, ""))


def _status(pinned: str, latest: str) -> Status:
    if latest == pinned:
        return "current"
    return "outdated" if _version_key(latest) > _version_key(pinned) else "ahead"


def _query(spec: HarnessSpec, timeout_s: float) -> str:
    """The newest version's string, from the registry's client. Raises RuntimeError with its complaint."""
    package = spec.install.package
    if spec.install.method == "npm":
        argv = [
            "npm",
            "view",
            package,
            "version",
            "--fetch-retries=0",
            f"--fetch-timeout={int(timeout_s * 1000)}",
        ]
    else:
        argv = [
            sys.executable,
            "-m",
            "pip",
            "index",
            "versions",
            package,
            "--disable-pip-version-check",
            "--retries",
            "0",
            "--timeout",
            str(max(1, int(timeout_s))),
        ]
        if spec.install.python:  # versions for the Python its venv runs on (openhands needs 3.12), not ours
            argv += ["--python-version", spec.install.python]
    try:
        proc = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=timeout_s + 30,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"no answer in {timeout_s + 30:.0f} s") from None
    except FileNotFoundError as exc:
        raise RuntimeError(f"{argv[0]} is not installed ({exc.filename})") from None
    out = proc.stdout.strip()
    if proc.returncode != 0 or not out:
        lines = [
            line
            for line in (proc.stderr or proc.stdout).strip().splitlines()
            if line.strip() and not line.startswith("WARNING")
        ]
        raise RuntimeError(" ".join(lines[-2:])[:300] or f"exit {proc.returncode}, no output")
    if spec.install.method == "npm":
        return out.splitlines()[-1].strip().strip('"')
    match = _PIP_FIRST_LINE.match(out)
    if match is None:
        raise RuntimeError(f"unexpected `pip index` output: {out.splitlines()[0][:120]}")
    return match.group(1)


def latest_version(spec: HarnessSpec, *, timeout_s: float = 20.0) -> LatestVersion:
    """Ask `spec`'s registry for its newest version (never raises: an unreachable registry is a row)."""
    row = {
        "name": spec.name,
        "package": spec.install.package,
        "pinned": spec.install.version,
        "registry": "npm" if spec.install.method == "npm" else "pypi",
    }
    try:
        latest = _query(spec, timeout_s)
    except RuntimeError as exc:
        return LatestVersion(**row, latest=None, status="unreachable", error=str(exc))
    return LatestVersion(**row, latest=latest, status=_status(spec.install.version, latest))


def latest_versions(
    specs: list[HarnessSpec], *, timeout_s: float = 20.0, workers: int = 8
) -> list[LatestVersion]:
    """`latest_version` of every spec at once (in `specs`' order); the whole takes about one timeout."""
    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(specs)))) as pool:
        return list(pool.map(lambda spec: latest_version(spec, timeout_s=timeout_s), specs))
