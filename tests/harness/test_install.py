"""Install status reads the pinned prefixes; a second install of an installed harness is a fast no-op."""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from openenv.harness.catalog import get_spec
from openenv.resources import harness_installer
from openenv.harness.install import install_status


def test_status_reads_an_npm_prefix(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENENV_HARNESS_CACHE", str(tmp_path))
    spec = get_spec("pi")
    assert install_status(spec).installed is None and not install_status(spec).ready
    package = tmp_path / "pi" / "lib" / "node_modules" / spec.install.package
    package.mkdir(parents=True)
    (package / "package.json").write_text(json.dumps({"version": "0.0.1"}))
    (tmp_path / "pi" / "bin").mkdir()
    (tmp_path / "pi" / "bin" / "pi").touch()
    status = install_status(spec)
    assert status.installed == "0.0.1" and not status.ready, "a different version is not the pin"


def test_status_reads_a_pip_venv(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENENV_HARNESS_CACHE", str(tmp_path))
    spec = get_spec("mini-swe-agent")
    (tmp_path / "mini-swe-agent" / "lib" / "python3.11" / "site-packages"
     / f"mini_swe_agent-{spec.install.version}.dist-info").mkdir(parents=True)
    (tmp_path / "mini-swe-agent" / "bin").mkdir()
    (tmp_path / "mini-swe-agent" / "bin" / "mini").touch()
    assert install_status(spec).ready


@pytest.mark.parametrize("name", ["pi", "mini-swe-agent"])  # an npm prefix and a pip venv
def test_reinstalling_an_installed_harness_is_fast(name):
    if not install_status(get_spec(name)).ready:
        pytest.skip(f"{name} is not installed")
    start = time.monotonic()
    proc = subprocess.run(["bash", str(harness_installer()), name],
                          check=False, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "already installed" in proc.stderr
    assert time.monotonic() - start < 5


def test_unknown_name_fails_and_lists_the_known_ones():
    proc = subprocess.run(["bash", str(harness_installer()), "notepad"],
                          check=False, capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "unknown harness 'notepad'" in proc.stderr and "claude-code" in proc.stderr
