"""Install status reads the pinned prefixes; a second install of an installed harness is a fast no-op."""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from openenv.harness.catalog import get_spec
from openenv.harness.install import install_status
from openenv.resources import harness_installer


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
    (
        tmp_path
        / "mini-swe-agent"
        / "lib"
        / "python3.11"
        / "site-packages"
        / f"mini_swe_agent-{spec.install.version}.dist-info"
    ).mkdir(parents=True)
    (tmp_path / "mini-swe-agent" / "bin").mkdir()
    (tmp_path / "mini-swe-agent" / "bin" / "mini").touch()
    assert install_status(spec).ready


@pytest.mark.parametrize("name", ["pi", "mini-swe-agent"])  # an npm prefix and a pip venv
def test_reinstalling_an_installed_harness_is_fast(name):
    if not install_status(get_spec(name)).ready:
        pytest.skip(f"{name} is not installed")
    start = time.monotonic()
    proc = subprocess.run(
        ["bash", str(harness_installer()), name], check=False, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0 and "already installed" in proc.stderr
    assert time.monotonic() - start < 5


def test_unknown_name_fails_and_lists_the_known_ones():
    proc = subprocess.run(
        ["bash", str(harness_installer()), "notepad"], check=False, capture_output=True, text=True, timeout=60
    )
    assert (
        proc.returncode != 0 and "unknown harness 'notepad'" in proc.stderr and "claude-code" in proc.stderr
    )


def _pip_venv(cache, name: str, home: str) -> None:
    """A pip harness's prefix at its pin whose venv runs on the interpreter in `home`."""
    spec = get_spec(name)
    site = cache / name / "lib" / "python3.12" / "site-packages"
    (site / f"{spec.install.package.replace('-', '_')}-{spec.install.version}.dist-info").mkdir(parents=True)
    (cache / name / "bin").mkdir()
    (cache / name / "bin" / spec.install.bin).touch()
    (cache / name / "pyvenv.cfg").write_text(f"home = {home}\ninclude-system-site-packages = false\n")


def test_a_venv_on_an_interpreter_outside_the_cache_cannot_run_in_docker(tmp_path, monkeypatch):
    from openenv.harness.install import docker_blocker

    monkeypatch.setenv("OPENENV_HARNESS_CACHE", str(tmp_path))
    _pip_venv(tmp_path, "kimi-cli", "/opt/host-python/3.12.1/bin")
    reason = docker_blocker(get_spec("kimi-cli"))
    assert reason is not None and "/opt/host-python/3.12.1/bin" in reason
    assert "openenv harness install kimi-cli" in reason
    (tmp_path / "kimi-cli" / "pyvenv.cfg").write_text(f"home = {tmp_path}/python/3.12.1/bin\n")
    assert docker_blocker(get_spec("kimi-cli")) is None, "an interpreter under the cache is mounted"
    (tmp_path / "kimi-cli" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    assert docker_blocker(get_spec("kimi-cli")) is None, "Debian's python3 is in every sandbox image"
    assert docker_blocker(get_spec("pi")) is None, "npm installs run on the mounted cache's own node"


def test_terminus_needs_its_own_tmux_in_docker(tmp_path, monkeypatch):
    from openenv.harness.install import docker_blocker

    monkeypatch.setenv("OPENENV_HARNESS_CACHE", str(tmp_path))
    _pip_venv(tmp_path, "terminus-2", f"{tmp_path}/python/3.12.1/bin")
    assert "tmux" in (docker_blocker(get_spec("terminus-2")) or "")
    (tmp_path / "terminus-2" / "bin" / "tmux").touch()
    assert docker_blocker(get_spec("terminus-2")) is None


def test_the_script_unpacks_the_commands_the_docker_check_expects():
    from openenv.harness.install import DOCKER_COMMANDS

    text = harness_installer().read_text()
    table = text.split('PORTABLE_DEBS="', 1)[1].split('"', 1)[0]
    unpacked = {entry.split(":")[0]: (entry.split(":")[1].split("=")[0],) for entry in table.split()}
    assert unpacked == DOCKER_COMMANDS


def test_a_docker_episode_of_an_install_that_cannot_run_there_is_refused_before_the_harness_starts(
    tmp_path, session_context, monkeypatch
):
    from openenv.errors import EnvError
    from openenv.harness.launch import launch

    monkeypatch.setenv("OPENENV_HARNESS_CACHE", str(tmp_path))
    _pip_venv(tmp_path, "kimi-cli", "/opt/host-python/3.13.0/bin")

    class DockerLike:  # what launch sees of a DockerSandbox; nothing may be started in it
        kind = "docker"

        def start(self, *args, **kwargs):
            raise AssertionError("the harness was started")

        run = start

    ctx, home = session_context, session_context.home
    with pytest.raises(EnvError, match="cannot run in the Docker sandbox: its venv runs on /opt/host-python"):
        launch(get_spec("kimi-cli"), DockerLike(), ctx, timeout_s=10)  # type: ignore[arg-type]
    assert not home.exists(), "no config was written either"
