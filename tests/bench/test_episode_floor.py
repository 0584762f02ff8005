"""The floor's CLI runs with the environment openenv's sandbox gives it, so a ratio measures openenv alone.

A variable one side passed and the other dropped changed what the harness did: with `SSL_CERT_DIR` set,
codex reads every certificate in that folder each time it sets up an HTTP client (~870 files an episode),
so a floor without it ran a cheaper codex than the sandbox did.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from episode_floor import floor_env

from openenv.harness.catalog import get_spec
from openenv.harness.sandbox.local import DEFAULT_ENV_ALLOW, LocalSandbox
from openenv.harness.spec import SessionContext


def test_the_floor_passes_what_the_sandbox_passes_from_this_environment(
    tmp_path: Path, session_context: SessionContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in {"SSL_CERT_DIR": "/etc/ssl/certs", "TZ": "UTC", "TERM": "xterm"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("OPENENV_SECRET_OF_THE_HOST", "x")  # not passed by either side
    spec = get_spec("codex")
    env = floor_env(spec, session_context, {"TASK_VAR": "1"}, tmp=tmp_path)

    sandbox = LocalSandbox(network="host", isolation="none")
    try:
        theirs = sandbox.environment()
    finally:
        sandbox.close()
    passed = [name for name in DEFAULT_ENV_ALLOW if name != "PATH" and name in theirs]
    assert {"SSL_CERT_DIR", "TZ", "TERM"} <= set(passed)
    assert {name: env[name] for name in passed} == {name: theirs[name] for name in passed}
    assert "OPENENV_SECRET_OF_THE_HOST" not in env and "OPENENV_SECRET_OF_THE_HOST" not in theirs
    assert env["HOME"] == str(tmp_path / "home") and env["USER"] == theirs["USER"]
    assert env["TASK_VAR"] == "1" and env["CODEX_HOME"] == str(tmp_path / "home" / ".codex")
