"""What a soak is asked and what it reports: its config, its fault plan, each episode's result and the
accounted report (`summarize`). Pure values: the runner (`soak/runner.py`) makes the episodes."""

from __future__ import annotations

import random
from collections import Counter
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

from openenv.harness.sandbox.base import ProcessStatus

__all__ = [
    "EXPECTED_STATUS",
    "FAULT_KINDS",
    "EpisodePlan",
    "FaultKind",
    "KindSummary",
    "SoakConfig",
    "SoakEpisodeResult",
    "SoakReport",
    "fault_plan",
    "summarize",
]

FaultKind = Literal[
    "none",
    "upstream_down",
    "upstream_slow",
    "upstream_5xx",
    "client_retry",
    "harness_killed",
    "harness_hung",
    "harness_nonzero",
    "client_vanished",
]
FAULT_KINDS: tuple[FaultKind, ...] = get_args(FaultKind)  # the order the soak cycles through
EXPECTED_STATUS: dict[FaultKind, ProcessStatus] = {
    "none": "exited",
    "upstream_down": "exited",
    "upstream_slow": "exited",
    "upstream_5xx": "exited",
    "client_retry": "exited",
    "harness_killed": "crashed",
    "harness_hung": "timeout",
    "harness_nonzero": "failed",
    "client_vanished": "killed",
}


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SoakConfig(_Model):
    """How many episodes, how many at once, which harness, and the fault timings."""

    episodes: int = Field(default=200, gt=0)
    concurrency: int = Field(default=4, gt=0, le=32)
    harness: str = "codex"
    seed: int = 0
    kinds: tuple[FaultKind, ...] = FAULT_KINDS
    backend_timeout_s: float = Field(
        default=20.0, gt=0, description="VLLMBackend timeout; `slow` stalls past it"
    )
    episode_timeout_s: float = Field(
        default=120.0, gt=0, description="the harness's budget in normal episodes"
    )
    hang_timeout_s: float = Field(default=10.0, gt=0, description="the harness's budget when it will hang")
    max_steps: int = Field(default=8, gt=0)


class EpisodePlan(_Model):
    index: int
    kind: FaultKind
    status_code: int = 0  # the HTTP status of an injected backend error


class SoakEpisodeResult(_Model):
    """One episode's outcome and its ledger. `problems` is empty when everything matched."""

    index: int
    kind: FaultKind
    expected_status: ProcessStatus
    status: ProcessStatus | None
    steps: int = 0
    posts: int = 0
    refused: int = 0
    turns: int = 0
    gaps_backend: int = 0
    gaps_closed: int = 0
    gap_reasons: list[str] = Field(default_factory=list)
    faults_hit: int = 0
    backend_timeouts: int = 0  # gaps where vLLM itself (not an injected fault) did not answer in time
    replays: int = 0
    replays_identical: int = 0
    lost_turns: int = 0
    duplicate_turns: int = 0
    env_missing_turns: int = 0
    leaked_pids: list[int] = Field(default_factory=list)
    slow_cleanup: bool = False
    leaked_dir: bool = False
    session_left_open: bool = False
    wall_s: float = 0.0
    problems: list[str] = Field(default_factory=list)
    output_tail: str = ""

    @property
    def ok(self) -> bool:
        return not self.problems


class KindSummary(_Model):
    episodes: int = 0
    ok: int = 0
    statuses: dict[str, int] = Field(default_factory=dict)
    gaps: int = 0
    faults_hit: int = 0
    replays: int = 0
    wall_s: float = 0.0


class SoakReport(_Model):
    """The soak's totals; the targets are 0 lost, 0 duplicates, 0 leaks and 0 unaccounted gaps."""

    config: SoakConfig
    episodes: int
    ok: int
    wall_s: float
    per_kind: dict[str, KindSummary]
    requests: int
    turns: int
    refused: int
    replays: int
    replays_identical: int
    lost_turns: int
    duplicate_turns: int
    env_missing_turns: int
    gaps_backend: int
    gaps_closed: int
    faults_hit: int
    backend_timeouts: int
    gaps_unaccounted: int
    leaked_processes: int
    slow_cleanups: int
    leaked_children: int
    leaked_dirs: int
    leaked_sessions: int
    rss_mb_start: float
    rss_mb_end: float
    threads_start: int
    threads_end: int
    fds_start: int
    fds_end: int
    failures: list[SoakEpisodeResult]


def fault_plan(config: SoakConfig) -> list[EpisodePlan]:
    """Every kind equally often (round robin), in an order shuffled by `config.seed`."""
    rng = random.Random(config.seed)
    kinds = [config.kinds[i % len(config.kinds)] for i in range(config.episodes)]
    rng.shuffle(kinds)
    return [
        EpisodePlan(index=i, kind=kind, status_code=_status_code(kind, rng)) for i, kind in enumerate(kinds)
    ]


def _status_code(kind: FaultKind, rng: random.Random) -> int:
    """The backend's injected HTTP status: a retryable 5xx, or a 400 the harness gives up on."""
    if kind == "upstream_5xx":
        return rng.choice((500, 502, 503))
    return 400 if kind == "harness_nonzero" else 0


def _per_kind(results: list[SoakEpisodeResult]) -> dict[str, KindSummary]:
    kinds: dict[str, KindSummary] = {}
    for r in results:
        k = kinds.setdefault(r.kind, KindSummary())
        k.episodes += 1
        k.ok += r.ok
        k.statuses[str(r.status)] = k.statuses.get(str(r.status), 0) + 1
        k.gaps += r.gaps_backend + r.gaps_closed
        k.faults_hit += r.faults_hit
        k.replays += r.replays
        k.wall_s = round(k.wall_s + r.wall_s, 2)
    return kinds


def summarize(
    config: SoakConfig,
    results: list[SoakEpisodeResult],
    *,
    wall_s: float,
    start: tuple[float, int, int],
    end: tuple[float, int, int],
    leaked_children: int,
) -> SoakReport:
    """Totals over the episodes, with the process's RSS, threads and fds at the start and the end."""
    total: Counter[str] = Counter()
    for r in results:
        total.update(
            posts=r.posts,
            turns=r.turns,
            refused=r.refused,
            replays=r.replays,
            replays_identical=r.replays_identical,
            lost=r.lost_turns,
            dup=r.duplicate_turns,
            missing=r.env_missing_turns,
            gaps_backend=r.gaps_backend,
            gaps_closed=r.gaps_closed,
            faults=r.faults_hit,
            timeouts=r.backend_timeouts,
            unaccounted=abs(r.gaps_backend - r.faults_hit - r.backend_timeouts),
            leaked=len(r.leaked_pids),
            slow=r.slow_cleanup,
            dirs=r.leaked_dir,
            sessions=r.session_left_open,
        )
    return SoakReport(
        config=config,
        episodes=len(results),
        ok=sum(r.ok for r in results),
        wall_s=round(wall_s, 1),
        per_kind=_per_kind(results),
        requests=total["posts"],
        turns=total["turns"],
        refused=total["refused"],
        replays=total["replays"],
        replays_identical=total["replays_identical"],
        lost_turns=total["lost"],
        duplicate_turns=total["dup"],
        env_missing_turns=total["missing"],
        gaps_backend=total["gaps_backend"],
        gaps_closed=total["gaps_closed"],
        faults_hit=total["faults"],
        backend_timeouts=total["timeouts"],
        gaps_unaccounted=total["unaccounted"],
        leaked_processes=total["leaked"],
        slow_cleanups=total["slow"],
        leaked_children=leaked_children,
        leaked_dirs=total["dirs"],
        leaked_sessions=total["sessions"],
        rss_mb_start=round(start[0], 1),
        rss_mb_end=round(end[0], 1),
        threads_start=start[1],
        threads_end=end[1],
        fds_start=start[2],
        fds_end=end[2],
        failures=[r for r in results if not r.ok],
    )
