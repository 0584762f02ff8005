"""One training episode: a harness on a task, start to end, reduced to what GRPO needs.

A failure is an episode that produced nothing to learn from for reasons outside the policy: it ended
in status `error` (the engine, proxy, sandbox or verifier failed; openenv/harness/outcome.py), the
environment raised, the harness crashed, or no model turn was recorded. A harness that exits non-zero after the model's replies is *not* a failure: that is
the policy's outcome, and it gets the verifier's reward like any other.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from openenv.capture.trajectory import SequenceRow
from openenv.harness.environment import HarnessEnvironment
from openenv.harness.rollout import run_episode, save_trajectory
from openenv.harness.summary import EpisodeSummary
from openenv.harness.tasks.model import Task
from openenv.train.naive import naive_rows
from openenv.train.sequences import SequencePolicy, TrainedRows, trained_rows

__all__ = ["EnvFactory", "EpisodePolicy", "RowTokens", "TrainingEpisodeResult", "run_training_episode"]

EpisodePolicy = Literal["sample", "oracle", "demo"]
# Which tokens the rows hold: `exact` (the ids the engine sampled, spliced) or `naive` (re-rendered from the
# messages the harness sent back, as a text-in/text-out proxy would: a control, `openenv.train.naive`).
RowTokens = Literal["exact", "naive"]
# Builds a fresh environment for a harness name; each attempt gets its own (fresh sandbox, session).
EnvFactory = Callable[[str], HarnessEnvironment]


@dataclass
class TrainingEpisodeResult:
    """What one attempt at an episode left behind: the episode's summary (what `openenv run --json`
    prints) and its rows as GRPO gets them, each held whole, not copied field by field.

    Attributes:
        summary: the episode's summary; None when it never reached an end (the env raised, the worker
            was lost).
        trained: the rows that train and their token counts (`sequences.trained_rows`).
        error: why this attempt is a failure (our side's outage, no reward, an exception), else None.
        wall_s: the attempt's wall time, env construction included.
        node: where it ran: a Ray node id, or None for this process.
        trajectory: the full trajectory (JSONL) on that node, when one was kept.
        token_changes: with `naive` rows, (sampled tokens, sampled tokens the naive rows do not hold).
    """

    harness: str
    task_id: str
    policy: EpisodePolicy
    summary: EpisodeSummary | None = None
    trained: TrainedRows = field(default_factory=lambda: TrainedRows(None))
    error: str | None = None
    wall_s: float = 0.0
    node: str | None = None
    trajectory: str | None = None
    token_changes: tuple[int, int] | None = None

    # ---- the rows (TrainedRows) ---------------------------------------------------------------------

    @property
    def row(self) -> SequenceRow | None:
        """The primary row (TRL's one completion per generation), or None."""
        return self.trained.primary

    @property
    def branches(self) -> tuple[SequenceRow, ...]:
        return self.trained.branches

    @property
    def rows(self) -> tuple[SequenceRow, ...]:
        """Every row that trains: the primary row, then the branches."""
        return self.trained.rows

    @property
    def dropped_sequences(self) -> int:
        return self.trained.dropped

    @property
    def tokens_sampled(self) -> int:
        return self.trained.tokens_sampled

    @property
    def tokens_trained(self) -> int:
        return self.trained.tokens_trained

    @property
    def trained_ratio(self) -> float:
        """tokens_trained / tokens_sampled (policy tokens; aux turns are counted apart in `aux_tokens`)."""
        return self.trained.trained_ratio

    # ---- the episode (EpisodeSummary); an episode without a summary scored nothing ------------------

    @property
    def reward(self) -> float:
        return (self.summary.reward or 0.0) if self.summary is not None else 0.0

    @property
    def breakdown(self) -> dict[str, float]:
        return dict(self.summary.reward_breakdown) if self.summary is not None else {}

    @property
    def status(self) -> str | None:
        return self.summary.status if self.summary is not None else None

    @property
    def tool_calls(self) -> int:
        return self.summary.tool_calls if self.summary is not None else 0

    @property
    def turns(self) -> int:
        return self.summary.turns if self.summary is not None else 0

    @property
    def aux_tokens(self) -> int:
        return self.summary.aux_tokens if self.summary is not None else 0

    @property
    def malformed_tool_calls(self) -> int:
        return self.summary.malformed_tool_calls if self.summary is not None else 0

    @property
    def failed(self) -> bool:
        return self.error is not None or self.status == "crashed" or self.row is None


def run_training_episode(
    make_env: EnvFactory,
    harness: str,
    task: Task,
    *,
    policy: EpisodePolicy = "sample",
    timeout_s: float | None = None,
    sequences: SequencePolicy = "all",
    keep_in: Path | None = None,
    tokens: RowTokens = "exact",
) -> TrainingEpisodeResult:
    """Run one episode in a fresh environment; exceptions become a failed result, never escape.

    `sample`: the backend samples every turn (on-policy). `oracle`: the task's reference solution is sent
    through the harness's tools and the backend scores it (an expert episode with the policy's own
    logprobs, useful to seed a group with a success); `demo` sends the solution's own commands instead of
    running the staged script (what a model can imitate). `sequences` says which of the episode's
    sequences train (`sequences.py`). `keep_in`: also write the full trajectory (every turn, aux
    included) there as JSONL, and name it in `result.trajectory`. `tokens="naive"` replaces the rows with
    what a text proxy would have built (`openenv.train.naive`) and counts the sampled tokens that changed.
    """
    start = time.monotonic()
    result = TrainingEpisodeResult(harness=harness, task_id=task.id, policy=policy)
    env = None
    try:
        env = make_env(harness)
        obs, summary = run_episode(env, task, policy=policy, timeout_s=timeout_s)
        stats = obs.stats
        result.summary = summary
        rows = obs.sequences or []
        record = env.capture_record() if tokens == "naive" and rows else None
        if record is not None:
            naive = naive_rows(*record)
            rows, result.token_changes = list(naive.rows), (naive.sampled, naive.changed)
        result.trained = trained_rows(rows, sequences, sampled=stats.sampled_tokens if stats else None)
        if (
            summary.status == "error"
        ):  # our side failed: not a score of 0; the failure policy retries or masks it
            result.error = f"error: {summary.error}"
        elif summary.reward is None:
            result.error = f"no reward ({summary.reward_status}): {summary.no_reward_reason}"
        if keep_in is not None:
            name = f"{harness}-{task.id}-{uuid.uuid4().hex[:8]}.jsonl"
            result.trajectory = str(save_trajectory(keep_in / name, env, obs, summary))
    except Exception as exc:
        result.error = f"{type(exc).__name__}: {exc}"
    finally:
        if env is not None:
            env.close()
    result.wall_s = time.monotonic() - start
    return result
