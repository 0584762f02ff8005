"""`openenv view` from the shell: argument checks, and a real server process answering with the page."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
from typer.testing import CliRunner

from openenv.cli.main import app as cli
from openenv.core.net import free_port

FIXTURE = Path(__file__).parents[1] / "export" / "fixtures" / "pi-oracle.jsonl"


def test_files_and_proxy_together_or_neither_are_refused():
    assert "not both" in CliRunner().invoke(cli, ["view"]).output
    both = CliRunner().invoke(cli, ["view", str(FIXTURE), "--proxy", "http://127.0.0.1:1", "--session", "t"])
    assert both.exit_code == 2 and "not both" in both.output
    no_token = CliRunner().invoke(cli, ["view", "--proxy", "http://127.0.0.1:1"])
    assert no_token.exit_code == 2 and "--proxy needs --session" in no_token.output


def test_a_missing_trajectory_file_is_named():
    result = CliRunner().invoke(cli, ["view", "/nonexistent/run.jsonl"])
    assert result.exit_code == 1 and "/nonexistent/run.jsonl" in result.output


def test_view_serves_the_episode_page_on_loopback(tiny_model):
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "openenv.cli.main",
            "view",
            str(FIXTURE),
            "--port",
            str(port),
            "--model",
            str(tiny_model),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # printed once the server listens: "viewer at URL?token=... (...)"
        assert "viewer at " in line, (
            line,
            proc.stderr.read() if proc.poll() is not None and proc.stderr else "",
        )
        url = line.split("viewer at ", 1)[1].split()[0]
        assert url.startswith(f"http://127.0.0.1:{port}/?token=")
        with httpx.Client(timeout=10) as browser:  # keeps the cookie the first visit sets, as a browser does
            page = browser.get(url)
            again = browser.get(f"http://127.0.0.1:{port}/episodes/0")
        assert page.status_code == 200 and again.status_code == 200
        assert "pi-oracle" in page.text and 'id="merge-ratio">1.00<' in page.text
        # Another local user, or a page in the browser, without the token; and a DNS-rebinding Host.
        assert httpx.get(f"http://127.0.0.1:{port}/api/episodes/0", timeout=10).status_code == 401
        token = url.split("token=", 1)[1]
        rebound = httpx.get(
            f"http://127.0.0.1:{port}/",
            headers={"Host": "evil.example", "Authorization": f"Bearer {token}"},
            timeout=10,
        )
        assert rebound.status_code == 403
    finally:
        proc.terminate()
        proc.wait(10)
