"""Rollout metrics for TRL's logs: per-harness reward and tool calls, and the failure policy's counters.

Names: `harness/<name>/{reward,solved,tool_calls,turns,episodes,sequences,tokens_trained_ratio,aux_tokens,
malformed_tool_calls}` (means per episode except the counts)
over the unmasked episodes of the batch, and `rollout/{failed_episodes,error_episodes,retries,masked_groups,dropped_sequences,
trained_rows,tokens_sampled,tokens_trained,tokens_trained_ratio,aux_tokens,budget_episodes,episode_wall_s,
zero_signal_groups}`, and with naive rows (`RolloutConfig.tokens="naive"`) `rollout/naive_changed`: the share
of sampled tokens the naive rows do not hold.
`tokens_trained_ratio` is tokens_trained / tokens_sampled over policy tokens (1.00 when every sequence
trains); aux turns' tokens are never trained and are counted apart in `aux_tokens`. `zero_signal_groups` is the
share of trained groups whose episodes all got the same verifier reward: GRPO's advantage is zero for
every row of such a group, so its episodes taught nothing (shaping terms such as the tool-call bonus may
still differ; this counts the task's own verdict).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from statistics import fmean

from openenv.train.episode import TrainingEpisodeResult
from openenv.train.failures import GroupOutcome

__all__ = ["log_rollout_metrics", "rollout_metrics", "zero_signal_share"]


def rollout_metrics(outcomes: Sequence[GroupOutcome]) -> dict[str, float]:
    """The batch's metrics as one flat dict."""
    per_harness: dict[str, list[TrainingEpisodeResult]] = defaultdict(list)
    results = [r for o in outcomes for r in o.results]
    for outcome in outcomes:
        if outcome.masked:
            continue
        for r in outcome.results:
            per_harness[r.harness].append(r)
    metrics: dict[str, float] = {}
    for name, eps in sorted(per_harness.items()):
        metrics |= {
            f"harness/{name}/reward": fmean(r.reward for r in eps),
            f"harness/{name}/solved": fmean(r.breakdown.get("solved", 0.0) for r in eps),
            f"harness/{name}/tool_calls": fmean(float(r.tool_calls) for r in eps),
            f"harness/{name}/turns": fmean(float(r.turns) for r in eps),
            f"harness/{name}/episodes": float(len(eps)),
            f"harness/{name}/sequences": fmean(float(len(r.rows) + r.dropped_sequences) for r in eps),
            f"harness/{name}/tokens_trained_ratio": _ratio(eps),
            f"harness/{name}/aux_tokens": float(sum(r.aux_tokens for r in eps)),
            f"harness/{name}/malformed_tool_calls": fmean(float(r.malformed_tool_calls) for r in eps),
        }
    trained = [r for o in outcomes if not o.masked for r in o.results]
    metrics |= {
        "rollout/failed_episodes": float(sum(r.failed for r in results)),
        "rollout/error_episodes": float(sum(o.errored for o in outcomes)),
        "rollout/retries": float(sum(o.retries for o in outcomes)),
        "rollout/masked_groups": float(sum(o.masked for o in outcomes)),
        "rollout/dropped_sequences": float(sum(r.dropped_sequences for r in results)),
        "rollout/trained_rows": float(sum(len(r.rows) for r in trained)),
        "rollout/tokens_sampled": float(sum(r.tokens_sampled for r in trained)),
        "rollout/tokens_trained": float(sum(r.tokens_trained for r in trained)),
        "rollout/tokens_trained_ratio": _ratio(trained),
        "rollout/aux_tokens": float(sum(r.aux_tokens for r in results)),
        "rollout/budget_episodes": float(sum(r.status == "budget" for r in results)),
        "rollout/episode_wall_s": fmean(r.wall_s for r in results) if results else 0.0,
        "rollout/zero_signal_groups": zero_signal_share(outcomes),
    }
    changes = [r.token_changes for r in trained if r.token_changes is not None]
    if changes:
        sampled = sum(s for s, _ in changes)
        metrics["rollout/naive_changed"] = sum(c for _, c in changes) / sampled if sampled else 0.0
    return metrics


def zero_signal_share(outcomes: Sequence[GroupOutcome]) -> float:
    """Of the unmasked groups of two or more episodes, the share whose rewards are all equal (0.0 when
    there is none: no group, no evidence of wasted episodes)."""
    groups = [o for o in outcomes if not o.masked and len(o.results) > 1]
    flat = sum(len({r.reward for r in o.results}) == 1 for o in groups)
    return flat / len(groups) if groups else 0.0


def _ratio(results: Sequence[TrainingEpisodeResult]) -> float:
    """Trained over sampled policy tokens, summed over the episodes (1.0 when nothing was sampled)."""
    sampled = sum(r.tokens_sampled for r in results)
    return sum(r.tokens_trained for r in results) / sampled if sampled else 1.0


def log_rollout_metrics(log: Callable[[str, float], None], outcomes: Sequence[GroupOutcome]) -> None:
    """Send every metric through `log(name, value)` (TRL's `log_metric`)."""
    for name, value in rollout_metrics(outcomes).items():
        log(name, value)
