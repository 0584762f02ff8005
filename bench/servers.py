"""The one way the benchmarks start a server: our proxy, the reference's, or a stand-in engine.

Every bench that needs a proxy in its own process starts it here, so they all run it the same way:
`ours()` is `openenv proxy` with its admin API on the model port and without a key (a bench opens its
sessions where it sends its turns) and without a journal (bench_journal.py measures what the journal
adds); `reference()` is the reference capture server from its own venv, away from our tree (its import
name is ours too). Before this module, bench_fidelity.py started our proxy without the admin settings and
its `POST /sessions` got an error body (`KeyError: 'token'` in section 3 of the report).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
REF_VENV = REPO / ".cache" / "reference-venv"  # scripts/install_reference.sh (the interop tests' too)
REF_PYTHON = REF_VENV / "bin" / "python"
REF_VERSION = "0.10.0"

__all__ = [
    "REF_PYTHON",
    "REF_VENV",
    "REF_VERSION",
    "Spawned",
    "engine",
    "ours",
    "ours_command",
    "reference",
    "reference_command",
    "reference_env",
    "spawn",
]


@dataclass
class Spawned:
    """A server process and the base URL it answers on."""

    proc: subprocess.Popen[bytes]
    base: str

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self, timeout: float = 20) -> None:
        """Terminate it and wait; killed if it has not exited within `timeout` (a server still busy with a
        load it was just given, the reference's at 1,000 sessions) (idempotent)."""
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout)


def spawn(
    command: Callable[[int], list[str]],
    health: str,
    *,
    cwd: Path | str = REPO,
    env: dict[str, str] | None = None,
    timeout: float = 600,
) -> Spawned:
    """Start `command(port)` on a free loopback port, silent, and wait until its `health` route answers 200.

    Raises:
        TransportError: the process exited first, or was not healthy within `timeout` seconds (it is
            then terminated).
    """
    from openenv.core.net import free_port, wait_for_health

    port = free_port()
    proc = subprocess.Popen(
        command(port), cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for_health(
            base,
            path=health,
            timeout_s=timeout,
            interval_s=0.1,
            gone=lambda: None if proc.poll() is None else f"it exited with {proc.returncode}",
        )
    except BaseException:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(20)
        raise
    return Spawned(proc, base)


def ours_command(engine_url: str, port: int, *, session_token: str | None = None) -> list[str]:
    """`openenv proxy --backend vllm` in front of `engine_url`, on the tiny model: one port, no admin key,
    no journal; with `session_token`, also one auto session of that token."""
    from openenv.models import tiny_model_path

    return [
        sys.executable,
        "-m",
        "openenv.cli.main",
        "proxy",
        "--backend",
        "vllm",
        "--vllm-url",
        engine_url,
        "--model",
        str(tiny_model_path()),
        "--port",
        str(port),
        "--admin-on-model-port",
        "--no-admin-key",
        "--no-journal",
        *(["--session-token", session_token] if session_token else []),
    ]


def ours(engine_url: str, *, session_token: str | None = None) -> Spawned:
    """Our proxy (see `ours_command`), healthy."""
    health = f"/s/{session_token}/v1/models" if session_token else "/docs"
    return spawn(lambda port: ours_command(engine_url, port, session_token=session_token), health)


def reference_command(engine_url: str, port: int, *, capture_level: str | None = None) -> list[str]:
    """The reference capture server in front of `engine_url` (its default capture level unless given)."""
    return [
        str(REF_PYTHON),
        "-m",
        "openenv.core.harness.capture.server",
        "--llm-url",
        engine_url,
        "--model",
        "tiny",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        *(["--capture-level", capture_level] if capture_level else []),
    ]


def reference_env() -> dict[str, str]:
    """Our environment without PYTHONPATH: one pointing at this tree would shadow the reference's package."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def reference(engine_url: str, *, capture_level: str | None = None, timeout: float = 600) -> Spawned:
    """The reference capture server (needs `.cache/reference-venv`), run from /tmp, away from our egg-info."""
    return spawn(
        lambda port: reference_command(engine_url, port, capture_level=capture_level),
        "/health",
        cwd="/tmp",
        env=reference_env(),
        timeout=timeout,
    )


def engine(kind: str, *args: str) -> Spawned:
    """A stand-in engine from bench/engines.py (`instant` or `replay`)."""
    script = str(REPO / "bench" / "engines.py")
    return spawn(lambda port: [sys.executable, script, kind, *args, "--port", str(port)], "/health")
