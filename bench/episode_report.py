"""`bench_episode`'s report: the openenv / floor ratios of each row and the Markdown tables (also what
`bench/report.py` renders for section 6b)."""

from __future__ import annotations

import random
from typing import Any

__all__ = ["PHASES", "interval", "ratios", "render"]

PHASES = ("sandbox", "harness_start", "harness_wait", "proxy_answer", "verifier", "teardown", "other")


def interval(
    ours: list[float], floor: list[float], *, level: float = 0.9, draws: int = 4000
) -> tuple[float, float] | None:
    """A bootstrap interval for sum(ours) / sum(floor) over paired rounds, or None below 5 rounds.

    Rounds are resampled whole: a round's two batches ran back to back, under the same load, so it is
    the pair that is a draw from the machine's moods, not each batch alone. On a shared machine the same
    code gave codex 1.10x in one run and 1.19x in the next (docs/benchmarks.md 11o); the interval says
    how far one run's ratio can be read. Seeded: the same run renders the same interval.
    """
    n = len(ours)
    if n < 5 or len(floor) != n:
        return None
    rng = random.Random(0)
    stats = []
    for _ in range(draws):
        picks = [rng.randrange(n) for _ in range(n)]
        stats.append(sum(ours[i] for i in picks) / sum(floor[i] for i in picks))
    stats.sort()
    tail = (1.0 - level) / 2
    return stats[int(tail * draws)], stats[int((1.0 - tail) * draws) - 1]


def ratios(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """openenv / floor per harness and concurrency: wall per episode, CPU per episode, episodes/min;
    with the rounds of each batch recorded, the CPU and wall ratios' 90% bootstrap intervals."""
    by = {(r["harness"], r["concurrency"], r["side"]): r for r in rows}
    out = []
    for (harness, c, side), ours in by.items():
        floor = by.get((harness, c, "floor"))
        if side != "openenv" or floor is None:
            continue
        out.append(
            {
                "harness": harness,
                "concurrency": c,
                "wall": ours["wall_per_episode_s"] / floor["wall_per_episode_s"],
                "cpu": ours["cpu_per_episode_s"] / floor["cpu_per_episode_s"],
                # against the CLI alone: the floor's tests taken out (0 in runs from before they ran)
                "wall_cli": ours["wall_per_episode_s"]
                / (floor["wall_per_episode_s"] - floor.get("grading_wall_per_episode_s", 0.0)),
                "cpu_cli": ours["cpu_per_episode_s"]
                / (floor["cpu_per_episode_s"] - floor.get("grading_cpu_per_episode_s", 0.0)),
                "throughput": floor["episodes_per_min"] / ours["episodes_per_min"],
                "memory": ours["peak_mb_per_episode"] / max(floor["peak_mb_per_episode"], 1e-9),
                "cpu_interval": interval(ours.get("batch_cpu_s", []), floor.get("batch_cpu_s", [])),
                "wall_interval": interval(ours.get("batch_wall_s", []), floor.get("batch_wall_s", [])),
            }
        )
    return out


def _span(bounds: Any) -> str:
    return "" if not bounds else f" ({bounds[0]:.2f}-{bounds[1]:.2f})"


def render(report: dict[str, Any]) -> str:
    """The tables, as markdown."""
    head = (
        "| harness | c | side | episodes/min | wall/episode (s) | CPU/episode (s) | of which proxy+env (s) "
        "| peak MB per episode | ok | load 1m |\n|---|---:|---|---:|---:|---:|---:|---:|---:|---:|"
    )
    lines = [head]
    for r in report["rows"]:
        lines.append(
            f"| {r['harness']} | {r['concurrency']} | {r['side']} | {r['episodes_per_min']:.1f} "
            f"| {r['wall_per_episode_s']:.2f} | {r['cpu_per_episode_s']:.2f} "
            f"| {r['self_cpu_per_episode_s']:.2f} | {r['peak_mb_per_episode']:.0f} "
            f"| {r['ok']}/{r['episodes']} | {r['load_1m']:.1f} |"
        )
    lines += [
        "",
        "| harness | c | wall ratio (90% interval) | CPU ratio (90% interval) | wall vs the CLI alone "
        "| CPU vs the CLI alone | throughput ratio (floor/openenv) | memory ratio |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in report["ratios"]:
        lines.append(
            f"| {r['harness']} | {r['concurrency']} | {r['wall']:.2f}x{_span(r.get('wall_interval'))} "
            f"| {r['cpu']:.2f}x{_span(r.get('cpu_interval'))} "
            f"| {r.get('wall_cli', r['wall']):.2f}x | {r.get('cpu_cli', r['cpu']):.2f}x "
            f"| {r['throughput']:.2f}x | {r['memory']:.2f}x |"
        )
    lines += [
        "",
        "where openenv's wall time goes, seconds per episode:",
        "",
        "| harness | c | " + " | ".join(PHASES) + " | the stand-in engine's calls |",
        "|---|---:|" + "---:|" * (len(PHASES) + 1),
    ]
    for r in report["rows"]:
        if r["side"] == "openenv":
            lines.append(
                f"| {r['harness']} | {r['concurrency']} | "
                + " | ".join(f"{r['phases'][p]:.2f}" for p in PHASES)
                + f" | {r.get('engine_wall_per_episode_s', float('nan')):.3f} |"
            )
    lines += [
        "",
        (
            "where openenv's CPU goes at c=1 (one episode at a time, so the run's CPU is the episode's), "
            "CPU seconds per episode; the floor's whole episode beside it:"
        ),
        "",
        "| harness | floor | " + " | ".join(PHASES) + " |",
        "|---|---:|" + "---:|" * len(PHASES),
    ]
    by = {(r["harness"], r["concurrency"], r["side"]): r for r in report["rows"]}
    for r in report["rows"]:
        if r["side"] == "openenv" and r["concurrency"] == 1 and "phase_cpu" in r:
            floor = by.get((r["harness"], 1, "floor"))
            lines.append(
                f"| {r['harness']} | {floor['cpu_per_episode_s'] if floor else float('nan'):.2f} | "
                + " | ".join(f"{r['phase_cpu'][p]:.2f}" for p in PHASES)
                + " |"
            )
    lines.append(
        f"\nload average before {tuple(round(x, 1) for x in report['load_before'])}, "
        f"after {tuple(round(x, 1) for x in report['load_after'])}; task {report['task']}, "
        f"{report['rounds']} paired batch(es) per concurrency (intervals: the rounds resampled, from 5 up); "
        f"CPU counted by {report['cpu_counted_by']}; "
        f"model time per policy turn {report.get('model_s', 0.0):g} s"
    )
    return "\n".join(lines)
