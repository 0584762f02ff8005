"""The eval report: solve rate, mean reward, tool calls and turns per harness, as Markdown, JSON and a PNG.

This is the "same weights, different harness" table: one row per harness over the same tasks.

An episode that ended in status `error` (our side failed: engine, proxy, sandbox, harness start, verifier;
see openenv/harness/outcome.py), or that never produced a result, measured nothing about the harness:
it is counted in the `errors` column and left out of every other figure. The solve rate is solved / scored.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from statistics import fmean

from pydantic import BaseModel, ConfigDict, Field

from openenv.eval.episodes import EvalEpisodeResult

__all__ = ["HarnessScore", "Report", "is_error", "summarize", "write_report"]

SOLVED_AT = 1.0  # an episode counts as solved when its reward reaches this


class HarnessScore(BaseModel):
    """One harness's row of the table."""

    model_config = ConfigDict(extra="forbid")

    harness: str
    episodes: int
    scored: int = Field(description="episodes the verifier graded (episodes - errors)")
    solved: int
    solve_rate: float | None = Field(description="solved / scored; None when no episode was scored")
    mean_reward: float | None
    mean_tool_calls: float | None
    mean_turns: float | None
    errors: int = Field(description="episodes that ended in status error; in no other column")

    def cells(self) -> list[str]:
        """The row as the table shows it (`-` where no episode was scored)."""

        def shown(value: float | None, spec: str) -> str:
            return "-" if value is None else format(value, spec)

        return [
            self.harness,
            str(self.episodes),
            str(self.scored),
            str(self.solved),
            shown(self.solve_rate, ".0%"),
            shown(self.mean_reward, ".3f"),
            shown(self.mean_tool_calls, ".2f"),
            shown(self.mean_turns, ".2f"),
            str(self.errors),
        ]


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
        head = (
            f"Backend `{self.backend}`, policy `{self.policy}`, {len(self.tasks)} task(s) x {self.repeats} "
            "repeat(s). Errors (our side failed) are in no other column; solve rate = solved / scored."
            "\n\n| harness | episodes | scored | solved | solve rate | mean reward | mean tool calls | "
            "mean turns | errors |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n"
        )
        lines = ["| " + " | ".join(r.cells()) + " |" for r in self.rows]
        return head + "\n".join(lines) + "\n"


def is_error(result: EvalEpisodeResult) -> bool:
    """The episode measured nothing: it ended in status `error`, never ran to a result, or has no reward."""
    return result.error is not None or result.summary.status == "error" or result.summary.reward is None


def summarize(
    results: Sequence[EvalEpisodeResult], *, backend: str, policy: str, tasks: list[str], repeats: int
) -> Report:
    """Group episode results by harness (in first-seen order) into table rows."""
    by_harness: dict[str, list[EvalEpisodeResult]] = {}
    for result in results:
        by_harness.setdefault(result.summary.harness, []).append(result)
    rows = []
    for harness, group in by_harness.items():
        scored = [r for r in group if not is_error(r)]
        solved = sum((r.summary.reward or 0.0) >= SOLVED_AT for r in scored)
        rows.append(
            HarnessScore(
                harness=harness,
                episodes=len(group),
                scored=len(scored),
                solved=solved,
                solve_rate=solved / len(scored) if scored else None,
                mean_reward=fmean(r.summary.reward or 0.0 for r in scored) if scored else None,
                mean_tool_calls=fmean(r.summary.tool_calls for r in scored) if scored else None,
                mean_turns=fmean(r.summary.turns for r in scored) if scored else None,
                errors=len(group) - len(scored),
            )
        )
    return Report(
        backend=backend, policy=policy, tasks=tasks, repeats=repeats, rows=rows, episodes=list(results)
    )


def write_report(report: Report, out_dir: Path) -> dict[str, Path]:
    """Write `results.md`, `results.json` and `solve_rate.png` into `out_dir`; returns their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {
        "markdown": out_dir / "results.md",
        "json": out_dir / "results.json",
        "chart": out_dir / "solve_rate.png",
    }
    paths["markdown"].write_text(report.markdown())
    paths["json"].write_text(report.model_dump_json(indent=2))
    _bar_chart(report, paths["chart"])
    return paths


def _bar_chart(report: Report, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")  # no display: render straight to the file
    import matplotlib.pyplot as plt

    names = [r.harness for r in report.rows]
    rates = [100 * (r.solve_rate or 0.0) for r in report.rows]
    fig, ax = plt.subplots(figsize=(max(4.0, 1.2 * len(names) + 2), 3.6), dpi=100)
    bars = ax.bar(names, rates, color="#3b7dd8")
    ax.bar_label(
        bars,
        labels=[f"{r:.0f}%" if row.scored else "no score" for r, row in zip(rates, report.rows, strict=True)],
        padding=2,
    )
    ax.set_ylim(0, 110)
    ax.set_ylabel("solve rate (%)")
    ax.set_title(f"solve rate per harness ({report.backend}, {report.policy}, {len(report.tasks)} tasks)")
    plt.setp(ax.get_xticklabels(), rotation=20, ha="right")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
