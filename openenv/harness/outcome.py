"""How an episode ended, and whether its reward means anything: the one place that decides `error`.

Every episode ends in one of these statuses (`EpisodeSummary.status`, `openenv run`'s table and JSON):

- `exited`, `failed`: the harness ended on its own, exit code 0 or not; the verifier's verdict is the reward.
- `timeout`: the harness ran past its wall-clock budget and was stopped; the verdict is the reward.
- `budget`: the proxy ended the episode at a turn or token cap; the verdict is the reward.
- `crashed`, `killed`: the harness died of a signal; graded like the others when the policy played.
- `error`: something on **our** side ended the episode, so the policy was not really measured. There is
  no reward (None, never 0), the cause is in `EpisodeSummary.error`, `openenv run` exits non-zero,
  `openenv eval` counts it in its own column (never in the solve rate) and training retries it, then
  masks its group (`openenv/train/failures.py`).

The causes of `error` (each has a fault-injection test in tests/reliability/test_harness_faults.py):

- the engine was unreachable, or stopped answering: the harness's last model request failed on our side
  (a gap in the trajectory) and the harness gave up after it;
- the sandbox, or the harness in it, could not start (an exception from `reset`), or the harness ended
  before it sent a single model request with a non-zero status (its own output tail is in the cause);
- the episode was aborted under a step (the env was closed, the proxy session vanished);
- the verifier could not grade: it crashed, timed out, or the tests wrote no usable reward file.

A transient engine fault that the harness retried through is not an error: its last request was answered,
and the verdict on the finished workspace is a real reward.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from openenv.capture.trajectory import TurnRecord

__all__ = ["EpisodeStatus", "engine_failure", "episode_error", "harness_start_failure", "verifier_failure"]

EpisodeStatus = Literal["exited", "failed", "crashed", "timeout", "killed", "budget", "error"]

_TAIL_CHARS = 600  # the harness's own last words in the summary: enough for a stack's last frames


# A gap names the error its turn ended with (`capture/session.py`). These are ours: the engine did not
# answer (down, stalled past the turn timeout, a 5xx), the proxy failed or was full. A `BadRequest` (the
# request itself was refused, e.g. past the context window) and a client that hung up are the harness's.
_OUR_GAPS = ("BackendUnavailable", "EnvError", "CapacityError")


def _ours(gap: str | None) -> bool:
    return gap is not None and gap.split(":", 1)[0] in _OUR_GAPS


def engine_failure(records: Sequence[TurnRecord]) -> str | None:
    """The engine or proxy failure the harness ended on: its last model request failed on our side."""
    main = [r for r in records if not r.aux]
    if not main or not _ours(main[-1].gap):
        return None
    failed = sum(_ours(r.gap) for r in main)
    return (
        f"the model request failed on our side and the harness gave up ({failed} of {len(main)} requests "
        f"failed; last: {main[-1].gap})"
    )


def harness_start_failure(status: str, records: Sequence[TurnRecord], output_tail: str) -> str | None:
    """The harness ended with a non-zero status before it asked the model anything: it never ran."""
    if records or status in ("exited", "running", "budget"):
        return None
    tail = output_tail.strip()[-_TAIL_CHARS:] or "(no output)"
    return f"the harness ended ({status}) before its first model request; its output ends: {tail}"


def verifier_failure(reward_status: str | None, reason: str | None) -> str | None:
    """The verifier gave no verdict (crash, timeout, no usable reward file); else None."""
    if reward_status in (None, "scored"):
        return None
    return f"the verifier gave no reward ({reward_status}): {reason or 'no reason given'}"


def episode_error(
    status: str,
    records: Sequence[TurnRecord],
    output_tail: str,
    reward_status: str | None,
    reason: str | None,
) -> str | None:
    """The cause that makes a finished episode an `error` (first that applies), or None when it is scored."""
    return (
        engine_failure(records)
        or harness_start_failure(status, records, output_tail)
        or verifier_failure(reward_status, reason)
    )
