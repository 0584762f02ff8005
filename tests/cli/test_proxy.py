"""`openenv proxy` as users run it: a real subprocess serving the proxy in front of vLLM."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import openai
import pytest

from openenv.testing.vllm_server import free_port

OPENENV = [sys.executable, "-m", "openenv.cli.main"]


def test_proxy_serves_a_session_in_front_of_vllm(tiny_model: Path, vllm_url: str) -> None:
    port = free_port()
    proc = subprocess.Popen([*OPENENV, "proxy", "--backend", "vllm", "--upstream", vllm_url, "--model",
                             str(tiny_model), "--port", str(port), "--session-token", "cli-test"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        lines = _read_until(proc, "session base_url:", timeout=180)
        base_url = lines[-1].split("session base_url:", 1)[1].strip()
        assert base_url == f"http://127.0.0.1:{port}/s/cli-test"
        client = openai.OpenAI(base_url=base_url + "/v1", api_key="unused", max_retries=0, timeout=60)
        reply = client.chat.completions.create(model="tiny", max_tokens=4,
                                               messages=[{"role": "user", "content": "hi"}])
        assert reply.usage is not None and reply.usage.completion_tokens == 4
    finally:
        proc.terminate()
        proc.wait(30)


def test_vllm_backend_without_upstream_is_a_usage_error(tiny_model: Path) -> None:
    result = subprocess.run([*OPENENV, "proxy", "--backend", "vllm", "--model", str(tiny_model)],
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 2
    assert "--upstream" in result.stdout + result.stderr


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
