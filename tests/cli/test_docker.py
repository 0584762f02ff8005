"""`openenv build` and `openenv sandbox sweep` through typer's runner, on a real engine where needed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from openenv.cli import docker as docker_cli
from openenv.harness.sandbox.docker import engine_available

REPO = Path(__file__).resolve().parents[2]
runner = CliRunner()


@pytest.fixture
def app() -> typer.Typer:
    """An app with only this module's commands (what `openenv` gets once it registers `docker`)."""
    app = typer.Typer()
    docker_cli.register(app)

    @app.callback()
    def _root() -> None:
        """openenv"""

    return app


def test_importing_the_commands_does_not_import_the_docker_sdk() -> None:
    code = "import sys, openenv.cli.docker; print('docker' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_build_of_an_unknown_harness_fails_fast_naming_the_known_ones(app: typer.Typer) -> None:
    result = runner.invoke(app, ["build", "no-such-harness"])
    assert result.exit_code == 2
    assert "unknown harness 'no-such-harness'" in result.output
    assert "claude-code" in result.output


@pytest.mark.skipif(engine_available() is not None, reason=engine_available() or "")
def test_sandbox_sweep_all_removes_a_live_sandbox_which_then_reports_itself_lost(app: typer.Typer) -> None:
    from openenv.harness.sandbox.docker import DockerSandbox

    subprocess.run(["bash", str(REPO / "scripts" / "build_base_image.sh")], check=True)
    with DockerSandbox() as box:
        result = runner.invoke(app, ["sandbox", "sweep", "--all"])
        assert result.exit_code == 0, result.output
        assert "removed 1 containers" in result.output
        assert (box.lost_reason() or "").startswith("sandbox lost")
