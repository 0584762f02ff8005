"""The eval report: rows per harness, Markdown, JSON and the bar chart, from hand-made episode results."""

from __future__ import annotations

from openenv.eval.episodes import EvalEpisodeResult
from openenv.eval.report import Report, summarize, write_report
from openenv.testing.results import episode_summary


def _result(
    harness: str, reward: float, tool_calls: int, turns: int, error: str | None = None
) -> EvalEpisodeResult:
    summary = episode_summary(
        harness=harness,
        reward=reward,
        turns=turns,
        tool_calls=tool_calls,
        reward_breakdown={"reward": reward},
        wall_s=1.0,
    )
    return EvalEpisodeResult(episode_id=f"{harness}-{reward}", summary=summary, trajectory="", error=error)


RESULTS = [
    _result("pi", 1.0, 1, 2),
    _result("codex", 0.0, 3, 4),
    _result("pi", 0.0, 2, 3),
    _result("codex", 0.0, 0, 0, error="BadRequest: boom"),
]


def _error(harness: str, cause: str) -> EvalEpisodeResult:
    """An episode our side failed (status `error`), as run_episode reports it: no reward, the cause."""
    summary = episode_summary(
        harness=harness,
        reward=None,
        reward_status="error",
        status="error",
        error=cause,
        tool_calls=5,
        sequences=0,
        merge_ratio=0.0,
        wall_s=1.0,
    )
    return EvalEpisodeResult(episode_id=f"{harness}-error", summary=summary, trajectory="", error=cause)


def test_rows_are_per_harness_in_first_seen_order_with_solve_rate_and_means():
    report = summarize(RESULTS, backend="local", policy="sample", tasks=["t"], repeats=2)
    pi, codex = report.rows
    assert (pi.harness, pi.episodes, pi.scored, pi.solved, pi.solve_rate) == ("pi", 2, 2, 1, 0.5)
    assert (pi.mean_tool_calls, pi.mean_turns, pi.errors) == (1.5, 2.5, 0)
    # the errored episode is in `errors` only: not in the solve rate, nor in the means
    assert (codex.harness, codex.scored, codex.solve_rate, codex.mean_tool_calls, codex.errors) == (
        "codex",
        1,
        0.0,
        3.0,
        1,
    )


def test_an_error_episode_is_counted_apart_and_never_lowers_the_solve_rate():
    """An engine outage is not a failed attempt: pi solved its one scored episode, 100%, 1 error."""
    results = [
        _result("pi", 1.0, 1, 2),
        _error("pi", "the model request failed on our side"),
        _error("gptme", "the episode could not start: EnvError: no sandbox"),
    ]
    pi, gptme = summarize(results, backend="vllm", policy="sample", tasks=["t"], repeats=2).rows
    assert (pi.episodes, pi.scored, pi.solved, pi.solve_rate, pi.mean_reward, pi.errors) == (
        2,
        1,
        1,
        1.0,
        1.0,
        1,
    )
    assert (gptme.scored, gptme.solve_rate, gptme.mean_reward, gptme.errors) == (0, None, None, 1)
    md = summarize(results, backend="vllm", policy="sample", tasks=["t"], repeats=2).markdown()
    assert "| gptme | 1 | 0 | 0 | - | - | - | - | 1 |" in md


def test_markdown_table_has_a_row_per_harness():
    md = summarize(RESULTS, backend="local", policy="sample", tasks=["t"], repeats=2).markdown()
    assert "| pi | 2 | 2 | 1 | 50% | 0.500 | 1.50 | 2.50 | 0 |" in md
    assert "| codex | 2 | 1 | 0 | 0% | 0.000 | 3.00 | 4.00 | 1 |" in md


def test_write_report_writes_markdown_json_and_a_png_chart(tmp_path):
    report = summarize(RESULTS, backend="local", policy="sample", tasks=["t"], repeats=2)
    paths = write_report(report, tmp_path)
    assert Report.model_validate_json(paths["json"].read_text()) == report
    assert paths["markdown"].read_text() == report.markdown()
    png = paths["chart"].read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000
