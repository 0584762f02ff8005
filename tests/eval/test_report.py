"""The eval report: rows per harness, Markdown, JSON and the bar chart, from hand-made episode results."""

from __future__ import annotations

from openenv.eval.episodes import EvalEpisodeResult
from openenv.eval.report import Report, summarize, write_report
from openenv.harness.rollout import EpisodeSummary


def _result(
    harness: str, reward: float, tool_calls: int, turns: int, error: str | None = None
) -> EvalEpisodeResult:
    summary = EpisodeSummary(harness=harness, task="t", policy="sample", reward=reward, status="exited", turns=turns,
                             tool_calls=tool_calls, sequences=1, merge_ratio=1.0, aux_turns=0,
                             reward_breakdown={"reward": reward}, wall_s=1.0)
    return EvalEpisodeResult(episode_id=f"{harness}-{reward}", summary=summary, trajectory="", error=error)


RESULTS = [_result("pi", 1.0, 1, 2), _result("codex", 0.0, 3, 4), _result("pi", 0.0, 2, 3),
           _result("codex", 0.0, 0, 0, error="BadRequest: boom")]


def test_rows_are_per_harness_in_first_seen_order_with_solve_rate_and_means():
    report = summarize(RESULTS, backend="local", policy="sample", tasks=["t"], repeats=2)
    pi, codex = report.rows
    assert (pi.harness, pi.episodes, pi.solved, pi.solve_rate) == ("pi", 2, 1, 0.5)
    assert (pi.mean_tool_calls, pi.mean_turns, pi.errors) == (1.5, 2.5, 0)
    assert (codex.harness, codex.solve_rate, codex.mean_tool_calls, codex.errors) == ("codex", 0.0, 1.5, 1)


def test_markdown_table_has_a_row_per_harness():
    md = summarize(RESULTS, backend="local", policy="sample", tasks=["t"], repeats=2).markdown()
    assert "| pi | 2 | 1 | 50% | 0.500 | 1.50 | 2.50 | 0 |" in md
    assert "| codex | 2 | 0 | 0% | 0.000 | 1.50 | 2.00 | 1 |" in md


def test_write_report_writes_markdown_json_and_a_png_chart(tmp_path):
    report = summarize(RESULTS, backend="local", policy="sample", tasks=["t"], repeats=2)
    paths = write_report(report, tmp_path)
    assert Report.model_validate_json(paths["json"].read_text()) == report
    assert paths["markdown"].read_text() == report.markdown()
    png = paths["chart"].read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000
