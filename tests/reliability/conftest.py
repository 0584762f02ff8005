"""Reliability figures: every test here reports its numbers, printed at the end of the run.

A reliability test asserts its target (0 leaked processes, 0 lost turns, ...) *and* records the figure it
measured with `figures.record(...)`, so a green run still says how close to the edge it was. The figures
are printed in pytest's terminal summary and written to `artifacts/reliability.json`.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from openenv.capture.backends.local import LocalBackend
from openenv.capture.renderer import Renderer
from openenv.capture.server import CaptureServer
from openenv.harness.sandbox.local import sandboxed_processes
from openenv.soak.faults import FaultProxy

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
def make_proxy(renderer: Renderer, local_backend: LocalBackend) -> Iterator[Callable[..., CaptureServer]]:
    """`make_proxy(admin_key=..., admin_port=0)`: a started `CaptureServer` on the in-process tiny model,
    with any other `CaptureServer` options; each is stopped when the test ends."""
    started: list[CaptureServer] = []

    def make(**options: Any) -> CaptureServer:
        started.append(CaptureServer(backend=local_backend, renderer=renderer, **options).start())
        return started[-1]

    yield make
    for server in started:
        server.stop()


@pytest.fixture
def fault_proxy(vllm_url: str) -> Iterator[FaultProxy]:
    """A `FaultProxy` in front of the session's real vLLM server (passing until told otherwise)."""
    with FaultProxy(vllm_url) as proxy:
        yield proxy


def _read_until(proc: subprocess.Popen[str], marker: str, timeout_s: float = 240.0) -> str:
    """The first line of `proc`'s stdout that contains `marker`; fails the test, with what it printed, if the
    process exits first or `timeout_s` passes."""
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout_s
    lines: list[str] = []
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line and proc.poll() is not None:
            pytest.fail(f"the process exited {proc.returncode} before {marker!r}:\n" + "".join(lines))
        lines.append(line)
        if marker in line:
            return line
    pytest.fail(f"no {marker!r} within {timeout_s:g} s:\n" + "".join(lines))


@pytest.fixture
def read_until() -> Callable[..., str]:
    """`read_until(proc, "marker", timeout_s=240)`: waits for a subprocess (a client, `openenv proxy`) to say
    it got somewhere, and returns that line of its stdout."""
    return _read_until


class Leaks:
    """Processes a test left behind: new children of this process, processes any sandbox of this test
    process started (its marker), and members of the given process groups."""

    def __init__(self) -> None:
        self._me = psutil.Process()
        self._baseline = {p.pid for p in self._me.children(recursive=True)}
        self._seen: set[tuple[int, float]] = set()  # (pid, create time): orphans stay found after reparenting

    def snapshot(self) -> None:
        """Remember this process's current descendants (call mid-test, while the harness runs)."""
        for proc in self._me.children(recursive=True):
            try:
                if proc.pid not in self._baseline:
                    self._seen.add((proc.pid, proc.create_time()))
            except psutil.Error:
                continue

    def alive(self, groups: Iterable[int] = ()) -> list[str]:
        self.snapshot()
        groups, sandboxed = set(groups), {p.pid for p in sandboxed_processes()}
        found = []
        for proc in psutil.process_iter():
            try:
                ours = proc.pid in sandboxed or (proc.pid, proc.create_time()) in self._seen
                if (ours or os.getpgid(proc.pid) in groups) and proc.status() != psutil.STATUS_ZOMBIE:
                    found.append(f"{proc.pid} {proc.name()}")
            except (psutil.Error, ProcessLookupError):
                continue
        return found

    def settle(self, groups: Iterable[int] = (), within_s: float = 10.0) -> list[str]:
        """What is still alive once `within_s` has passed (or earlier, as soon as nothing is)."""
        deadline = time.monotonic() + within_s
        while (left := self.alive(groups)) and time.monotonic() < deadline:
            time.sleep(0.2)
        return left


@pytest.fixture
def leaks() -> Leaks:
    """`leaks.settle(groups=[pgid])` lists the processes this test left alive (the target is [])."""
    return Leaks()


def attack_totals(rows: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Attacks tried and blocked over every test that recorded `attack=..., blocked=...` (the env server's,
    the proxy's, the sandbox's), with the names of any that got through; and the same per attacker and
    sandbox (`attacker=`: `network` unless the row says `agent` or `local-user`; `sandbox=`: `-` when none
    is involved), so the agent's and other local users' attacks are counted apart from the network's."""
    attacks = [row for row in rows.values() if "attack" in row]
    through = [str(row["attack"]) for row in attacks if not row.get("blocked")]
    by: dict[str, dict[str, Any]] = {}
    for row in attacks:
        key = f"{row.get('attacker', 'network')} / {row.get('sandbox', '-')}"
        tally = by.setdefault(key, {"tried": 0, "blocked": 0})
        tally["tried"] += 1
        tally["blocked"] += bool(row.get("blocked"))
    return {
        "tried": len(attacks),
        "blocked": len(attacks) - len(through),
        "not_blocked": through,
        "by_attacker": dict(sorted(by.items())),
    }


def pytest_terminal_summary(terminalreporter: Any) -> None:
    rows = {k: v for k, v in _FIGURES.items() if v}
    if not rows:
        return
    terminalreporter.section("reliability figures")
    for nodeid, values in rows.items():
        shown = ", ".join(f"{k}={v}" for k, v in values.items())
        terminalreporter.write_line(f"{nodeid.split('::', 1)[-1]}: {shown}")
    totals = attack_totals(rows)
    if totals["tried"]:
        terminalreporter.write_line(
            f"attacks tried / blocked: {totals['tried']} / {totals['blocked']}"
            + (f" (not blocked: {', '.join(totals['not_blocked'])})" if totals["not_blocked"] else "")
        )
        for key, tally in totals["by_attacker"].items():
            terminalreporter.write_line(f"  by {key}: {tally['tried']} / {tally['blocked']}")
        rows = {**rows, "attacks": totals}
    _OUT.parent.mkdir(parents=True, exist_ok=True)
    _OUT.write_text(json.dumps(rows, indent=2, default=str) + "\n")
