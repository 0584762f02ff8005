"""`bench_episode`'s report: the openenv / floor ratios of each row and the Markdown tables (also what
`bench/report.py` renders for section 6b)."""

from __future__ import annotations

from typing import Any

__all__ = ["PHASES", "ratios", "render"]

PHASES = ("sandbox", "harness_start", "harness_wait", "proxy_answer", "verifier", "teardown", "other")


def ratios(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """openenv / floor per harness and concurrency: wall per episode, CPU per episode, episodes/min."""
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
            }
        )
    return out


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
        "| harness | c | wall ratio | CPU ratio | wall vs the CLI alone | CPU vs the CLI alone "
        "| throughput ratio (floor/openenv) | memory ratio |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in report["ratios"]:
        lines.append(
            f"| {r['harness']} | {r['concurrency']} | {r['wall']:.2f}x | {r['cpu']:.2f}x "
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
        f"{report['rounds']} paired batch(es) per concurrency; CPU counted by {report['cpu_counted_by']}; "
        f"model time per policy turn {report.get('model_s', 0.0):g} s"
    )
    return "\n".join(lines)
