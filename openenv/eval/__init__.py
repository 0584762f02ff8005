"""Evaluation: many harness episodes run concurrently, summarized as a solve-rate table per harness.

`episodes` runs one recorded episode in-process (shared by `openenv eval` and the harness MCP tools),
`runner` runs a grid of them concurrently, `report` writes the table (Markdown, JSON) and the bar chart.
"""

from __future__ import annotations

from openenv.eval.episodes import EpisodeRequest, EvalEpisodeResult, run_recorded_episode
from openenv.eval.report import HarnessScore, Report, summarize, write_report
from openenv.eval.runner import EvalPlan, run_eval

__all__ = [
    "EpisodeRequest",
    "EvalEpisodeResult",
    "EvalPlan",
    "HarnessScore",
    "Report",
    "run_eval",
    "run_recorded_episode",
    "summarize",
    "write_report",
]
