"""`openenv proxy` as users run it: a real subprocess serving the proxy in front of vLLM."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import openai
import pytest

from openenv.core.net import free_port

OPENENV = [sys.executable, "-m", "openenv.cli.main"]


def test_proxy_serves_a_session_in_front_of_vllm(tiny_model: Path, vllm_url: str, tmp_path: Path) -> None:
    port = free_port()
    proc = subprocess.Popen(
        [
            *OPENENV,
            "proxy",
            "--backend",
            "vllm",
            "--vllm-url",
            vllm_url,
            "--model",
            str(tiny_model),
            "--port",
            str(port),
            "--session-token",
            "cli-test",
            "--journal-dir",
            str(tmp_path),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        lines = _read_until(proc, "session base_url:", timeout=180)
        base_url = lines[-1].split("session base_url:", 1)[1].strip()
        assert base_url == f"http://127.0.0.1:{port}/s/cli-test"
        client = openai.OpenAI(base_url=base_url + "/v1", api_key="unused", max_retries=0, timeout=60)
        reply = client.chat.completions.create(
            model="tiny", max_tokens=4, messages=[{"role": "user", "content": "hi"}]
        )
        assert reply.usage is not None and reply.usage.completion_tokens == 4
    finally:
        proc.terminate()
        proc.wait(30)
    [journal] = tmp_path.glob("*.jsonl")  # the session's turn, on disk, closed at shutdown
    lines = journal.read_text().splitlines()
    assert len(lines) == 3 and '"t":"closed","reason":"shutdown"' in lines[-1]


def test_the_admin_api_has_a_generated_key_and_a_port_of_its_own_by_default(
    tiny_model: Path, tmp_path: Path
) -> None:
    """Started with no admin options, the proxy prints a fresh key once, and the model port (the one
    harnesses know) has no admin API at all. No --model either: the tiny model is the default, as in every
    other command (it alone required one)."""
    import httpx

    port = free_port()
    proc = subprocess.Popen(
        [*OPENENV, "proxy", "--port", str(port), "--journal-dir", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        text = "".join(_read_until(proc, "journal:", timeout=180))
        admin = text.split("POST ", 1)[1].split("/sessions", 1)[0]
        key = text.split("admin key (shown once", 1)[1].split(": ", 1)[1].split()[0]
        assert len(key) >= 32 and admin != f"http://127.0.0.1:{port}"
        with httpx.Client(timeout=30) as http:
            assert http.post(f"http://127.0.0.1:{port}/sessions", json={}).status_code == 404
            assert http.post(f"{admin}/sessions", json={}).status_code == 401
            opened = http.post(f"{admin}/sessions", json={}, headers={"Authorization": f"Bearer {key}"})
            assert opened.status_code == 201 and opened.json()["base_url"].startswith(
                f"http://127.0.0.1:{port}/s/"
            )
            assert opened.json()["journal"].startswith(str(tmp_path))
    finally:
        proc.terminate()
        proc.wait(30)
    assert text.count(key) == 1, "the key is printed once"


def test_no_admin_key_is_refused_off_loopback(tiny_model: Path) -> None:
    """(192.0.2.1 is TEST-NET: refused before any bind, and it could not be bound anyway.)"""
    result = subprocess.run(
        [*OPENENV, "proxy", "--model", str(tiny_model), "--host", "192.0.2.1", "--no-admin-key"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 2 and "--admin-key" in result.stdout + result.stderr


def test_vllm_backend_without_vllm_url_is_a_usage_error(tiny_model: Path) -> None:
    result = subprocess.run(
        [*OPENENV, "proxy", "--backend", "vllm", "--model", str(tiny_model)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 2
    assert "--vllm-url" in result.stdout + result.stderr


def test_upstream_is_still_accepted_as_a_deprecated_spelling_of_vllm_url(tiny_model: Path) -> None:
    """Scripts written before the rename keep working: the URL check passes (the run then stops at the
    next check, --no-admin-key off loopback, before binding anything) and a warning names the new flag."""
    result = subprocess.run(
        [
            *OPENENV,
            "proxy",
            "--backend",
            "vllm",
            "--upstream",
            "http://127.0.0.1:9",
            "--model",
            str(tiny_model),
            "--host",
            "192.0.2.1",
            "--no-admin-key",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    out = result.stdout + result.stderr
    assert result.returncode == 2 and "--admin-key" in out and "No such option" not in out
    assert "--upstream is deprecated; use --vllm-url" in out
    assert (
        "--upstream"
        not in subprocess.run(
            [*OPENENV, "proxy", "--help"], capture_output=True, text=True, timeout=120, check=True
        ).stdout
    ), "the old spelling is hidden"


def _read_until(proc: subprocess.Popen[str], marker: str, timeout: float) -> list[str]:
    assert proc.stdout is not None
    deadline, lines = time.monotonic() + timeout, []
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            if proc.poll() is not None:
                pytest.fail(f"openenv proxy exited {proc.returncode}:\n" + "".join(lines))
            continue
        lines.append(line)
        if marker in line:
            return lines
    pytest.fail(f"no {marker!r} within {timeout}s:\n" + "".join(lines))
