"""How far one run of `bench_episode.py` can be read: its ratios carry an interval over the paired rounds.

On a shared machine the same code gave codex 1.10x in one run and 1.19x in the next; a ratio without
its spread invites reading 0.01 as a result.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from episode_report import PHASES, interval, ratios, render


def _row(side: str, batch_cpu: list[float], batch_wall: list[float]) -> dict[str, object]:
    n = len(batch_cpu)
    return {
        "harness": "codex",
        "concurrency": 1,
        "side": side,
        "episodes": n,
        "episodes_per_min": 60 / (sum(batch_wall) / n),
        "wall_per_episode_s": sum(batch_wall) / n,
        "cpu_per_episode_s": sum(batch_cpu) / n,
        "self_cpu_per_episode_s": 0.0,
        "peak_mb_per_episode": 100.0,
        "ok": n,
        "load_1m": 1.0,
        "phases": dict.fromkeys(PHASES, 0.0),
        "batch_cpu_s": batch_cpu,
        "batch_wall_s": batch_wall,
    }


def test_a_load_swing_that_hits_both_sides_of_a_round_does_not_widen_the_interval() -> None:
    floor = [0.4, 0.6] * 6  # the machine's mood, round by round
    ours = [1.12 * f for f in floor]
    low, high = interval(ours, floor) or (0.0, 0.0)
    assert abs(low - 1.12) < 1e-9 and abs(high - 1.12) < 1e-9  # rounds resampled whole, never apart


def test_rounds_that_disagree_give_an_interval_around_the_ratio() -> None:
    floor = [0.40] * 10
    ours = [0.44, 0.48] * 5  # 1.10x and 1.20x rounds
    low, high = interval(ours, floor) or (0.0, 0.0)
    assert 1.10 <= low < sum(ours) / sum(floor) < high <= 1.20


def test_too_few_rounds_give_no_interval() -> None:
    assert interval([0.5] * 4, [0.4] * 4) is None
    assert interval([0.5] * 6, [0.4] * 5) is None


def test_the_rendered_ratios_carry_their_intervals() -> None:
    floor = _row("floor", [0.40] * 6, [1.0] * 6)
    ours = _row("openenv", [0.44, 0.48] * 3, [1.1] * 6)
    [ratio] = ratios([floor, ours])
    assert (
        ratio["cpu_interval"] is not None
        and ratio["cpu_interval"][0] < ratio["cpu"] < ratio["cpu_interval"][1]
    )
    report = {
        "rows": [floor, ours],
        "ratios": [ratio],
        "load_before": (1.0, 1.0, 1.0),
        "load_after": (1.0, 1.0, 1.0),
        "task": "t",
        "rounds": 6,
        "cpu_counted_by": "cgroup",
    }
    low, high = ratio["cpu_interval"]
    assert f"| {ratio['cpu']:.2f}x ({low:.2f}-{high:.2f}) |" in render(report)
    assert "| 1.10x (1.10-1.10) |" in render(report)  # the wall's rounds all agree
