"""`openenv view` from the shell: argument checks, and a real server process answering with the page."""

from __future__ import annotations

import subprocess
import sys
import time
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
    proc = subprocess.Popen([sys.executable, "-m", "openenv.cli.main", "view", str(FIXTURE), "--port", str(port),
                             "--model", str(tiny_model)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                page = httpx.get(f"http://127.0.0.1:{port}/", timeout=5)
                break
            except httpx.HTTPError:
                assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
                assert time.monotonic() < deadline, "openenv view did not come up"
                time.sleep(0.3)
        assert page.status_code == 200
        assert "pi-oracle" in page.text and 'id="merge-ratio">1.00<' in page.text
    finally:
        proc.terminate()
        proc.wait(10)
