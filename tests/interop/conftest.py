"""Fixtures for the interop tests: the reference OpenEnv (`openenv==0.10.0` from PyPI) in its own venv.

The reference's import package is also `openenv`, so its code never runs in this interpreter: each test
runs a short script with the reference's interpreter (`python -I`, from a folder outside the checkout,
so neither our package nor the current directory is on its path) and reads back the JSON it prints.
"""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
REFERENCE_PY = Path(
    os.environ.get("OPENENV_REFERENCE_PYTHON", REPO / ".cache" / "reference-venv" / "bin" / "python")
)


class Reference:
    """The reference package's interpreter, run in isolation from ours."""

    def __init__(self, python: Path, workdir: Path) -> None:
        self.python = python
        self.workdir = workdir

    def run(self, script: str, *, timeout: float = 120, env: dict[str, str] | None = None) -> Any:
        """Run `script` under the reference's interpreter; it must print one JSON value on its last line."""
        proc = self.proc(script, timeout=timeout, env=env)
        assert proc.returncode == 0, (
            f"reference script failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
        )
        lines = [line for line in proc.stdout.splitlines() if line.strip()]
        assert lines, f"reference script printed nothing:\n{proc.stderr}"
        return json.loads(lines[-1])

    def proc(
        self, script: str, *, timeout: float = 120, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run `script` and return the finished process (for tests that expect a failure)."""
        full_env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
        full_env.update(env or {})
        return subprocess.run(
            [str(self.python), "-I", "-c", textwrap.dedent(script)],
            cwd=self.workdir,
            env=full_env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def cli(
        self, *args: str, timeout: float = 120, cwd: Path | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run the reference's own `openenv` command."""
        exe = self.python.parent / "openenv"
        full_env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
        return subprocess.run(
            [str(exe), *args],
            cwd=cwd or self.workdir,
            env=full_env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )


@pytest.fixture(scope="session")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Reference:
    """The reference OpenEnv (scripts/install_reference.sh installs it; CI fails without it)."""
    if not REFERENCE_PY.exists():
        pytest.skip(
            f"the reference openenv==0.10.0 is not installed at {REFERENCE_PY} (scripts/install_reference.sh)"
        )
    return Reference(REFERENCE_PY, tmp_path_factory.mktemp("reference-cwd"))
