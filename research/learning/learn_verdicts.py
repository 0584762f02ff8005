"""The rule every comparison on the learning pages follows: a difference counts when the means differ by more than
the larger of the two seed spreads (standard deviations), else it is undecided."""

from __future__ import annotations

import statistics

__all__ = ["compare", "finding", "mean_sd"]


def finding(verdict: str) -> str:
    """A finding's word from `compare(with, without)`: above reproduces it, below refutes it."""
    return {"above": "reproduced", "below": "refuted"}.get(verdict, "undecided")


def mean_sd(values: list[float]) -> tuple[float, float]:
    return statistics.mean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def compare(a: list[float], b: list[float]) -> str:
    """`above`, `below` or `within the seed spread of`: whether mean(a) differs from mean(b) by more than the larger
    standard deviation of the two."""
    (ma, sa), (mb, sb) = mean_sd(a), mean_sd(b)
    spread = max(sa, sb)
    if ma - mb > spread:
        return "above"
    if mb - ma > spread:
        return "below"
    return "within the seed spread of"
