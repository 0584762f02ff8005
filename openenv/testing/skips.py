"""A pytest plugin: one last line that counts a run's skipped tests and names the commonest reasons.

A green run with skips has not tested what the skipped tests cover. The suite's conftest imports the
hook; any other suite can use it with `-p openenv.testing.skips`.
"""

from __future__ import annotations

import pytest

__all__ = ["pytest_terminal_summary", "skip_summary"]

FIX = "scripts/install.sh --all installs what they need"


def _reason(report: pytest.TestReport) -> str:
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    return " ".join(str(reason).removeprefix("Skipped: ").split())


def skip_summary(reports: list[pytest.TestReport], *, shown: int = 3) -> str | None:
    """`SKIPPED n tests (...): 2x reason; 1x reason; +k more reasons`, or None without skips."""
    skipped = [r for r in reports if not hasattr(r, "wasxfail")]
    if not skipped:
        return None
    counts: dict[str, int] = {}
    for report in skipped:
        counts[_reason(report)] = counts.get(_reason(report), 0) + 1
    top = sorted(counts.items(), key=lambda kv: -kv[1])
    listed = "; ".join(f"{n}x {reason[:90]}" for reason, n in top[:shown])
    more = f"; +{len(top) - shown} more reasons" if len(top) > shown else ""
    return f"SKIPPED {len(skipped)} tests (not tested on this machine; {FIX}): {listed}{more}"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Write the skip summary line (nothing when no test was skipped)."""
    line = skip_summary(terminalreporter.stats.get("skipped", []))
    if line:
        terminalreporter.write_line(line, yellow=True, bold=True)
