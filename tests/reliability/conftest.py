"""Reliability figures: every test here reports its numbers, printed at the end of the run.

A reliability test asserts its target (0 leaked processes, 0 lost turns, ...) *and* records the figure it
measured with `figures.record(...)`, so a green run still says how close to the edge it was. The figures
are printed in pytest's terminal summary and written to `artifacts/reliability.json`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from openenv.testing.faults import FaultProxy

_FIGURES: dict[str, dict[str, Any]] = {}
_OUT = Path(__file__).resolve().parents[2] / "artifacts" / "reliability.json"


class Figures:
    """Collects one test's measured figures under its node id."""

    def __init__(self, nodeid: str) -> None:
        self._row = _FIGURES.setdefault(nodeid, {})

    def record(self, **values: Any) -> None:
        self._row.update(values)


@pytest.fixture
def figures(request: pytest.FixtureRequest) -> Figures:
    """`figures.record(leaked_processes=0, lost_turns=0, gaps=3)`: shown at the end of the run."""
    return Figures(request.node.nodeid)


@pytest.fixture
def fault_proxy(vllm_url: str) -> Iterator[FaultProxy]:
    """A `FaultProxy` in front of the session's real vLLM server (passing until told otherwise)."""
    with FaultProxy(vllm_url) as proxy:
        yield proxy


def pytest_terminal_summary(terminalreporter: Any) -> None:
    rows = {k: v for k, v in _FIGURES.items() if v}
    if not rows:
        return
    terminalreporter.section("reliability figures")
    for nodeid, values in rows.items():
        shown = ", ".join(f"{k}={v}" for k, v in values.items())
        terminalreporter.write_line(f"{nodeid.split('::', 1)[-1]}: {shown}")
    _OUT.parent.mkdir(parents=True, exist_ok=True)
    _OUT.write_text(json.dumps(rows, indent=2, default=str) + "\n")
