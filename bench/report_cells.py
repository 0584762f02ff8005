"""What every section of docs/benchmarks.md's report shares: the targets and the table cells."""

from __future__ import annotations

__all__ = [
    "FLAT_TARGET",
    "LATENCY_TARGET",
    "RATE_TARGET",
    "REFERENCE_TARGET",
    "TTFB_TARGET",
    "ratio",
    "markdown_table",
    "met_or_not",
]

LATENCY_TARGET = 1.05  # "the proxy adds <= 5% latency over calling vLLM directly"
RATE_TARGET = 300.0  # turns/s per process
FLAT_TARGET = 1.25  # CPU-ms/turn at any length over the 1-turn row
REFERENCE_TARGET = 2.0  # x the reference
TTFB_TARGET = 1.5  # issue 19: streamed time to first byte through the proxy <= 1.5x vLLM direct


def markdown_table(head: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def met_or_not(ok: bool) -> str:
    return "**met**" if ok else "**not met**"


def ratio(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}x"
