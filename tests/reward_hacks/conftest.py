"""The red-team figure: every trick tried, per sandbox, and whether it was blocked; printed at the end
of the run and written to `artifacts/reward_hacks.json` (as the reliability suite writes its figures).

Fixtures: the Docker engine with the offline base image (`client`, `python_image`), reused from the
sandbox tests' conftest pattern: one image build per session.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest

from openenv.harness.sandbox.docker import engine_available
from openenv.harness.sandbox.images import build_python_image

REPO = Path(__file__).resolve().parents[2]
_OUT = REPO / "artifacts" / "reward_hacks.json"
_ROWS: list[dict[str, Any]] = []


@pytest.fixture
def outcome() -> Any:
    """`outcome(trick=, sandbox=, category=, blocked=, reward=, status=)`: one row of the figure."""
    return lambda **row: _ROWS.append(row)


@pytest.fixture(scope="session")
def client() -> Iterator[docker.DockerClient]:
    reason = engine_available()
    if reason is not None:
        pytest.skip(reason)
    subprocess.run(["bash", str(REPO / "scripts" / "build_base_image.sh")], check=True, capture_output=True)
    engine = docker.from_env()
    yield engine
    engine.close()


@pytest.fixture(scope="session")
def python_image(client: docker.DockerClient) -> str:
    return build_python_image(client, progress=lambda line: None)


# Who attacks: the agent from inside the sandbox (`environment` rows: the sandbox and the verifier must
# stop it), another user on the same host (`local-user`), or the network (`network`). Counted apart.
ATTACKERS = {"environment": "agent", "local-user": "local-user", "network": "network"}


def totals(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per sandbox and attacker: attacks tried / blocked (and which were not); task-design tricks apart."""
    out: dict[str, Any] = {}
    for row in rows:
        side = out.setdefault(row["sandbox"], {"task_design": {}})
        if row["category"] == "task-design":
            side["task_design"][row["trick"]] = (
                "blocked" if row["blocked"] else "scored (the task's tests must guard)"
            )
            continue
        tally = side.setdefault(ATTACKERS[row["category"]], {"tried": 0, "blocked": 0, "not_blocked": []})
        tally["tried"] += 1
        tally["blocked"] += bool(row["blocked"])
        if not row["blocked"]:
            tally["not_blocked"].append(row["trick"])
    return out


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _ROWS:
        return
    summary = totals(_ROWS)
    terminalreporter.section("reward hacks")
    for sandbox, side in summary.items():
        for attacker in ATTACKERS.values():
            if (tally := side.get(attacker)) is None:
                continue
            missed = f" (not blocked: {', '.join(tally['not_blocked'])})" if tally["not_blocked"] else ""
            terminalreporter.write_line(
                f"{sandbox}, by {attacker}: tried {tally['tried']}, blocked {tally['blocked']}{missed}"
            )
    _OUT.parent.mkdir(parents=True, exist_ok=True)
    _OUT.write_text(json.dumps({"totals": summary, "rows": _ROWS}, indent=2) + "\n")
