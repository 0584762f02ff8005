"""The eval report: solve rate, mean reward, tool calls and turns per harness, as Markdown, JSON and a PNG.

This is the "same weights, different harness" table: one row per harness over the same tasks.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from statistics import fmean

from pydantic import BaseModel, ConfigDict

from openenv.eval.episodes import EvalEpisodeResult

__all__ = ["HarnessScore", "Report", "summarize", "write_report"]

SOLVED_AT = 1.0  # an episode counts as solved when its reward reaches this


class HarnessScore(BaseModel):
    """One harness's row of the table."""

    model_config = ConfigDict(extra="forbid")

    harness: str
    episodes: int
    solved: int
    solve_rate: float
    mean_reward: float
    mean_tool_calls: float
    mean_turns: float
    errors: int


class Report(BaseModel):
    """The whole table plus what was run."""

    model_config = ConfigDict(extra="forbid")

    backend: str
    policy: str
    tasks: list[str]
    repeats: int
    rows: list[HarnessScore]
    episodes: list[EvalEpisodeResult]

    def markdown(self) -> str:
        head = (f"Backend `{self.backend}`, policy `{self.policy}`, {len(self.tasks)} task(s) x {self.repeats} "
                "repeat(s).\n\n| harness | episodes | solved | solve rate | mean reward | mean tool calls | "
                "mean turns | errors |\n|---|---:|---:|---:|---:|---:|---:|---:|\n")
        lines = [f"| {r.harness} | {r.episodes} | {r.solved} | {r.solve_rate:.0%} | {r.mean_reward:.3f} | "
                 f"{r.mean_tool_calls:.2f} | {r.mean_turns:.2f} | {r.errors} |" for r in self.rows]
        return head + "\n".join(lines) + "\n"


def summarize(results: Sequence[EvalEpisodeResult], *, backend: str, policy: str, tasks: list[str],
              repeats: int) -> Report:
    """Group episode results by harness (in first-seen order) into table rows."""
    by_harness: dict[str, list[EvalEpisodeResult]] = {}
    for result in results:
        by_harness.setdefault(result.summary.harness, []).append(result)
    rows = []
    for harness, group in by_harness.items():
        solved = sum((r.summary.reward or 0.0) >= SOLVED_AT for r in group)
        rows.append(HarnessScore(
            harness=harness, episodes=len(group), solved=solved, solve_rate=solved / len(group),
            mean_reward=fmean(r.summary.reward or 0.0 for r in group),
            mean_tool_calls=fmean(r.summary.tool_calls for r in group),
            mean_turns=fmean(r.summary.turns for r in group), errors=sum(r.error is not None for r in group),
        ))
    return Report(backend=backend, policy=policy, tasks=tasks, repeats=repeats, rows=rows, episodes=list(results))


def write_report(report: Report, out_dir: Path) -> dict[str, Path]:
    """Write `results.md`, `results.json` and `solve_rate.png` into `out_dir`; returns their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"markdown": out_dir / "results.md", "json": out_dir / "results.json", "chart": out_dir / "solve_rate.png"}
    paths["markdown"].write_text(report.markdown())
    paths["json"].write_text(report.model_dump_json(indent=2))
    _bar_chart(report, paths["chart"])
    return paths


def _bar_chart(report: Report, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")  # no display: render straight to the file
    import matplotlib.pyplot as plt

    names = [r.harness for r in report.rows]
    rates = [100 * r.solve_rate for r in report.rows]
    fig, ax = plt.subplots(figsize=(max(4.0, 1.2 * len(names) + 2), 3.6), dpi=100)
    bars = ax.bar(names, rates, color="#3b7dd8")
    ax.bar_label(bars, labels=[f"{r:.0f}%" for r in rates], padding=2)
    ax.set_ylim(0, 110)
    ax.set_ylabel("solve rate (%)")
    ax.set_title(f"solve rate per harness ({report.backend}, {report.policy}, {len(report.tasks)} tasks)")
    plt.setp(ax.get_xticklabels(), rotation=20, ha="right")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
