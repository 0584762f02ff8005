"""`openenv serve | list | init | validate`, run as a user would: the real CLI, real subprocesses."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from openenv.cli.main import app
from openenv.core.auth import auth_headers, token_file
from openenv.core.net import free_port, wait_for_health
from openenv.errors import TransportError

REPO = Path(__file__).resolve().parents[2]
OPENENV = [sys.executable, "-m", "openenv.cli.main"]
runner = CliRunner()


def serve_subprocess(env: str, cwd: Path) -> Iterator[str]:
    """`openenv serve ENV --port P` in its own process; yields its URL once /health answers."""
    port = free_port()
    proc = subprocess.Popen(
        [*OPENENV, "serve", env, "--port", str(port)],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        try:  # 120 s: a cold interpreter on a busy 2-core box
            wait_for_health(
                url, timeout_s=120, gone=lambda: None if proc.poll() is None else "it exited", interval_s=0.1
            )
        except TransportError as exc:
            out = proc.stdout.read().decode() if proc.stdout and proc.poll() is not None else ""
            raise AssertionError(f"`openenv serve {env}` did not come up: {exc}\n{out}") from None
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture(scope="module")
def scaffolded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("scaffold")
    result = runner.invoke(app, ["init", "demo_env_one", "--dir", str(root)])
    assert result.exit_code == 0, result.output
    return root / "demo_env_one"


def test_list_shows_the_echo_env() -> None:
    result = runner.invoke(app, ["list"])
    assert result.exit_code == 0
    assert "echo" in result.output and "entry_point" in result.output


def test_init_writes_a_complete_env_package(scaffolded: Path) -> None:
    files = {p.relative_to(scaffolded).as_posix() for p in scaffolded.rglob("*") if p.is_file()}
    assert files == {
        "openenv.yaml",
        "pyproject.toml",
        "README.md",
        "demo_env_one_env/__init__.py",
        "demo_env_one_env/models.py",
        "demo_env_one_env/environment.py",
        "demo_env_one_env/client.py",
        "tests/test_demo_env_one_env.py",
    }


def test_init_refuses_bad_names_and_existing_folders(scaffolded: Path) -> None:
    bad = runner.invoke(app, ["init", "Bad-Name", "--dir", str(scaffolded.parent)])
    assert bad.exit_code == 2 and "must match [a-z][a-z0-9_]*" in bad.output
    again = runner.invoke(app, ["init", "demo_env_one", "--dir", str(scaffolded.parent)])
    assert again.exit_code == 2 and "already exists" in again.output


def test_the_scaffold_passes_static_validation(scaffolded: Path) -> None:
    result = runner.invoke(app, ["validate", str(scaffolded)])
    assert result.exit_code == 0, result.output
    assert "all 6 checks passed" in result.output


@pytest.mark.slow
def test_the_scaffold_passes_its_own_generated_tests(scaffolded: Path) -> None:
    env = os.environ | {"PYTHONDONTWRITEBYTECODE": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=scaffolded,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "3 passed" in proc.stdout


@pytest.mark.slow
def test_the_scaffold_served_by_the_cli_passes_live_validation(scaffolded: Path) -> None:
    for url in serve_subprocess(str(scaffolded), cwd=scaffolded.parent):
        result = runner.invoke(app, ["validate", str(scaffolded), "--url", url])
    assert result.exit_code == 0, result.output
    for name in ("live.health", "live.schema", "live.http_round_trip", "live.ws_round_trip"):
        assert name in result.output
    assert "all 10 checks passed" in result.output


@pytest.mark.slow
def test_serve_by_name_serves_echo() -> None:
    for url in serve_subprocess("echo", cwd=REPO):
        assert httpx.get(f"{url}/metadata").status_code == 401  # the server wants its token...
        # ...which this user's clients find in the 0600 file `openenv serve` left for its port
        assert httpx.get(f"{url}/metadata", headers=auth_headers(url)).json()["name"] == "echo"
        port = int(url.rsplit(":", 1)[1])
        assert token_file(port).stat().st_mode & 0o777 == 0o600
    assert not token_file(port).exists()  # removed when the server stopped


def test_serve_refuses_no_token_on_an_address_other_than_loopback() -> None:
    result = runner.invoke(app, ["serve", "echo", "--host", "0.0.0.0", "--no-token"])
    assert result.exit_code == 2 and "loopback" in result.output


def test_serve_an_unknown_env_exits_2_naming_it() -> None:
    result = runner.invoke(app, ["serve", "no_such_env"])
    assert result.exit_code == 2
    assert "no environment named 'no_such_env'" in result.output


def test_validate_exits_1_naming_every_failed_check(tmp_path: Path) -> None:
    (tmp_path / "openenv.yaml").write_text("name: x\nenvironment: nowhere_mod:Env\n")
    dead = f"http://127.0.0.1:{free_port()}"
    result = runner.invoke(app, ["validate", str(tmp_path), "--url", dead])
    assert result.exit_code == 1
    assert "3 check(s) failed: env.class, live.health, live.schema" in result.output


@pytest.fixture
def app_folder(tmp_path: Path) -> Path:
    """An env folder as the reference's `openenv init` lays one out (`app:` in openenv.yaml), whose app needs
    nothing of the reference, so this interpreter can serve it (the last resort of `find_python`)."""
    folder = tmp_path / "plain_env"
    (folder / "server").mkdir(parents=True)
    (folder / "openenv.yaml").write_text(
        "spec_version: 1\nname: plain_env\nversion: 0.1.0\ntype: space\n"
        "runtime: fastapi\napp: server.app:app\nport: 8000\n"
    )
    (folder / "server" / "__init__.py").write_text("")
    (folder / "server" / "app.py").write_text(
        "import os\nfrom fastapi import FastAPI\napp = FastAPI()\n"
        "@app.get('/health')\ndef health():\n    return {'status': 'healthy'}\n"
        "@app.get('/where')\ndef where():\n    return {'cwd': os.getcwd(), 'pythonpath': os.environ.get('PYTHONPATH')}\n"
    )
    return folder


def test_serve_runs_the_asgi_app_a_folder_names_from_inside_the_folder(app_folder: Path) -> None:
    for url in serve_subprocess(str(app_folder), cwd=REPO):
        where = httpx.get(f"{url}/where").json()
    # run as the reference's Dockerfile runs it: from the folder, and without our PYTHONPATH in its way
    assert where == {"cwd": str(app_folder.resolve()), "pythonpath": None}


def test_serve_refuses_a_token_for_an_app_that_checks_none(app_folder: Path) -> None:
    result = runner.invoke(app, ["serve", str(app_folder), "--token", "t"])
    assert result.exit_code == 2 and "checks no token" in result.output
