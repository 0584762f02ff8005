"""Rollout metrics for TRL's logs: per-harness reward and tool calls, and the failure policy's counters.

Names: `harness/<name>/{reward,solved,tool_calls,turns,episodes}` over the unmasked episodes of the batch,
and `rollout/{failed_episodes,retries,masked_groups,dropped_sequences,episode_wall_s}`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from statistics import fmean

from openenv.train.failures import GroupOutcome

__all__ = ["log_rollout_metrics", "rollout_metrics"]


def rollout_metrics(outcomes: Sequence[GroupOutcome]) -> dict[str, float]:
    """The batch's metrics as one flat dict."""
    per_harness: dict[str, list[tuple[float, float, float, float]]] = defaultdict(list)
    results = [r for o in outcomes for r in o.results]
    for outcome in outcomes:
        if outcome.masked:
            continue
        for r in outcome.results:
            per_harness[r.harness].append((r.reward, r.breakdown.get("solved", 0.0), float(r.tool_calls), float(r.turns)))
    metrics: dict[str, float] = {}
    for name, rows in sorted(per_harness.items()):
        reward, solved, calls, turns = (fmean(col) for col in zip(*rows, strict=True))
        metrics |= {f"harness/{name}/reward": reward, f"harness/{name}/solved": solved,
                    f"harness/{name}/tool_calls": calls, f"harness/{name}/turns": turns,
                    f"harness/{name}/episodes": float(len(rows))}
    metrics |= {
        "rollout/failed_episodes": float(sum(r.failed for r in results)),
        "rollout/retries": float(sum(o.retries for o in outcomes)),
        "rollout/masked_groups": float(sum(o.masked for o in outcomes)),
        "rollout/dropped_sequences": float(sum(r.dropped_sequences for r in results)),
        "rollout/episode_wall_s": fmean(r.wall_s for r in results) if results else 0.0,
    }
    return metrics


def log_rollout_metrics(log: Callable[[str, float], None], outcomes: Sequence[GroupOutcome]) -> None:
    """Send every metric through `log(name, value)` (TRL's `log_metric`)."""
    for name, value in rollout_metrics(outcomes).items():
        log(name, value)
