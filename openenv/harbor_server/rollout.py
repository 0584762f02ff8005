"""One `run_rollout`: a whole episode through our own machinery, answered as a `HarborRolloutResult`.

The episode is the one `openenv run` plays (`openenv.harness.rollout.run_episode` on a
`HarnessEnvironment`: sandbox, gated capture session, harness, verifier, outcome statuses), so the
Harbor road ends in the same machinery as every other road. This module only maps its outcome:

- every training row of ours becomes per-turn `HarborTurn`s: a turn's prompt is the row's tokens before
  its sampled span (the whole context, tool results included), its completion the sampled span, its
  logprobs those recorded at sampling, its `loss_mask` 0 over the prompt and our `env_mask` over the
  span; a turn reached through a fork appears once (its own row);
- status `error` (our side: engine, proxy, sandbox, harness start, verifier) is `ok=False` with the
  cause and no reward; any other end is `ok=True` with the verifier's reward (None when it gave none,
  with the reason in `findings`);
- a rollout cancelled mid-way (its client disconnected) closes the episode: the harness is killed and
  the sandbox removed before the cancellation propagates.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from openenv.capture.engine import CapturePool
from openenv.capture.trajectory import SequenceRow, TurnRecord
from openenv.errors import BadRequest, NotFound, OpenEnvError
from openenv.harbor_server.admission import Admitted
from openenv.harbor_server.wire import HarborConversation, HarborRolloutResult, HarborTurn
from openenv.harness.environment import HarnessEnvironment
from openenv.harness.episode_settings import EpisodeSettings
from openenv.harness.models import HarnessObservation
from openenv.harness.rollout import run_episode, save_trajectory
from openenv.harness.summary import EpisodeSummary
from openenv.harness.tasks import Task

__all__ = ["EpisodeHandle", "harbor_turns", "run_admitted"]


class EpisodeHandle:
    """The live episode of one rollout, so that a cancelled rollout can close it from the event loop."""

    def __init__(self) -> None:
        self.env: HarnessEnvironment | None = None
        self.cancelled = threading.Event()

    def close(self) -> None:
        """Kill the harness and remove the sandbox (safe while the episode's thread is still in a step)."""
        self.cancelled.set()
        env = self.env
        if env is not None:
            env.close()


def _play(
    admitted: Admitted,
    task: Task,
    handle: EpisodeHandle,
    runs_dir: Path | None,
    marks: dict[str, float],
    substitutes: dict[str, str],
    pool: CapturePool,
) -> tuple[HarnessObservation, EpisodeSummary, list[TurnRecord], list[Any], str]:
    """The episode, in a worker thread: returns its last observation, summary, turn records, the
    capture record's sequences (for the conversations) and the saved log's stem."""
    settings = EpisodeSettings.model_validate(  # the wire's strs, validated into the settings' Literals
        {
            "sandbox": admitted.sandbox,
            "sampling": admitted.sampling,
            "timeout_s": admitted.timeout_s,
            "budget": admitted.budget,
            "image_substitutes": substitutes,
        }
    )
    server = pool.acquire(admitted.engine)
    env = HarnessEnvironment(admitted.harness, engine=admitted.engine, server=server, settings=settings)
    handle.env = env
    if handle.cancelled.is_set():  # the client left while the env was being built
        env.close()
        raise asyncio.CancelledError

    def first_request(obs: HarnessObservation) -> None:
        marks.setdefault("started", time.monotonic())

    try:
        obs, summary = run_episode(
            env, task, policy=admitted.policy, on_step=first_request, timeout_s=admitted.timeout_s
        )
        records = env.trajectory()
        captured = env.capture_record()
        sequences = list(captured[0].sequences) if captured is not None else []
        stem = ""
        if runs_dir is not None:
            from openenv.export.log import log_name

            stem = log_name(env.spec.name, task.id)
            summary.trajectory = str(save_trajectory(runs_dir / f"{stem}.jsonl", env, obs, summary))
        return obs, summary, records, sequences, stem
    finally:
        env.close()


async def run_admitted(
    admitted: Admitted,
    task: Task,
    *,
    split: str,
    harness_word: str,
    reward_key: str,
    runs_dir: Path | None,
    queued_s: float = 0.0,
    image_substitutes: dict[str, str] | None = None,
    pool: CapturePool,
) -> HarborRolloutResult:
    """Play one admitted rollout and map its outcome (see the module doc), its capture server from
    `pool` (the serving service's). Cancellation closes it."""
    handle = EpisodeHandle()
    marks: dict[str, float] = {}
    start = time.monotonic()
    work = asyncio.ensure_future(
        asyncio.to_thread(_play, admitted, task, handle, runs_dir, marks, dict(image_substitutes or {}), pool)
    )
    try:
        obs, summary, records, sequences, stem = await asyncio.shield(work)
    except asyncio.CancelledError:
        handle.close()  # the harness dies, so the thread's step returns and the sandbox is released
        raise
    except (BadRequest, NotFound):
        raise  # the request's own mistake (a task this sandbox cannot run): refused, as admission refuses
    except Exception as exc:
        return _failed(admitted, task, split, harness_word, exc, time.monotonic() - start + queued_s)
    try:
        return _result(
            admitted,
            task,
            split=split,
            harness_word=harness_word,
            reward_key=reward_key,
            obs=obs,
            summary=summary,
            records=records,
            sequences=sequences,
            stem=stem,
            marks=marks,
            start=start,
            queued_s=queued_s,
        )
    except Exception as exc:
        return _failed(admitted, task, split, harness_word, exc, time.monotonic() - start + queued_s, stem)


def _failed(
    admitted: Admitted, task: Task, split: str, harness_word: str, exc: Exception, wall: float, stem: str = ""
) -> HarborRolloutResult:
    reason = exc.message if isinstance(exc, OpenEnvError) else str(exc) or "(no message)"
    return HarborRolloutResult(
        task_id=task.id,
        task_name=task.id,
        dataset=split,
        harness=harness_word,
        sandbox=admitted.sandbox,
        trial_name=stem,
        ok=False,
        wall_s=round(wall, 4),
        error=f"{type(exc).__name__}: {reason}",
        exception_type=type(exc).__name__,
    )


def _result(
    admitted: Admitted,
    task: Task,
    *,
    split: str,
    harness_word: str,
    reward_key: str,
    obs: HarnessObservation,
    summary: EpisodeSummary,
    records: list[TurnRecord],
    sequences: list[Any],
    stem: str,
    marks: dict[str, float],
    start: float,
    queued_s: float,
) -> HarborRolloutResult:
    wall = time.monotonic() - start
    timings = {"queue_s": round(queued_s, 4), "episode_s": round(wall, 4)}
    if "started" in marks:
        timings["start_s"] = round(marks["started"] - start, 4)
    result = HarborRolloutResult(
        task_id=task.id,
        task_name=task.id,
        dataset=split,
        harness=harness_word,
        sandbox=admitted.sandbox,
        trial_name=stem,
        session_id=uuid.uuid4().hex,
        wall_s=round(wall + queued_s, 4),
        phase_timings=timings,
        agent_log_tail=obs.output_tail[-2000:],
        findings=list(admitted.findings) + list(summary.notes),
    )
    trainable = admitted.policy == "sample" and admitted.purpose == "train"
    result.rollout_type = "train" if trainable else "eval"
    result.turns = harbor_turns(obs.sequences or [], records, trainable=trainable, sampling=admitted.sampling)
    result.n_turns = len(result.turns)
    result.n_roots = len(obs.sequences or [])
    result.multi_turn = result.n_turns > 1
    result.n_trainable_tokens = sum(sum(t.loss_mask or []) for t in result.turns if t.trainable)
    result.budget_stop_count = sum(1 for r in records if r.budget)
    result.conversations = _conversations(sequences)
    if summary.status == "error":
        result.ok, result.error, result.exception_type = False, summary.error, "EpisodeError"
        return result
    result.rewards = {k: float(v) for k, v in summary.reward_breakdown.items()}
    result.reward_key = reward_key
    if reward_key:
        if reward_key not in result.rewards:
            result.findings.append(
                f"reward_key {reward_key!r} is not among the verifier's rewards "
                f"({', '.join(result.rewards) or 'none'}); no reward"
            )
            return result
        result.reward = result.rewards[reward_key]
    else:
        result.reward = summary.reward
    if result.reward is None:
        result.findings.append(f"no reward ({summary.reward_status}): {summary.no_reward_reason}")
    return result


def harbor_turns(
    rows: list[SequenceRow], records: list[TurnRecord], *, trainable: bool, sampling: Any = None
) -> list[HarborTurn]:
    """Our training rows as the reference's per-turn rows (see the module doc); each turn once.

    Raises:
        ValueError: a row whose turn spans do not match its recorded completions (never expected: the
            rows and the records come from one capture session).
    """
    by_id = {r.id: r for r in records}
    seen: set[str] = set()
    turns: list[HarborTurn] = []
    for row in rows:
        full = row.prompt_ids + row.completion_ids
        for turn_id in row.turn_ids:
            record = by_id.get(turn_id)
            if record is None or record.completion is None or turn_id in seen:
                continue
            seen.add(turn_id)
            done = record.completion
            begin = record.prompt_len
            end = begin + len(done.token_ids)
            start = begin - len(row.prompt_ids)
            if start < 0 or full[begin:end] != list(done.token_ids):
                raise ValueError(f"turn {turn_id}: its sampled span does not match the row's tokens")
            span = (
                row.env_mask[start : start + len(done.token_ids)] if trainable else [0] * len(done.token_ids)
            )
            params: dict[str, Any] = {}
            if sampling is not None and sampling.temperature is not None:
                params["temperature"] = sampling.temperature
            if record.max_tokens is not None:
                params["max_tokens"] = record.max_tokens
            turns.append(
                HarborTurn(
                    turn=len(turns),
                    node_id=turn_id,
                    finish_reason=done.finish_reason,
                    prompt_token_ids=full[:begin],
                    completion_token_ids=list(done.token_ids),
                    per_token_logps=list(row.logprobs[start : start + len(done.token_ids)]),
                    loss_mask=[0] * begin + list(span),
                    n_tools=len(done.tool_calls),
                    trainable=bool(span) and any(span),
                    sampling_params=params,
                    requested_sampling_params={"overridden": list(record.overridden)}
                    if record.overridden
                    else {},
                    text=done.text,
                    tool_calls=[{"name": c.name, "arguments": c.arguments} for c in done.tool_calls],
                )
            )
    return turns


def _conversations(sequences: list[Any]) -> list[HarborConversation]:
    """Each training sequence's newest request messages plus its last reply, as readable messages."""
    out = []
    for seq in sequences:
        messages = [m.model_dump(mode="json") for m in seq.messages]
        head = seq.turns[-1].completion if seq.turns else None
        if head is not None:
            messages.append(
                {
                    "role": "assistant",
                    "content": head.text,
                    "tool_calls": [{"name": c.name, "arguments": c.arguments} for c in head.tool_calls],
                }
            )
        out.append(
            HarborConversation(
                root_id=str(seq.index), role="agent", n_turns=len(seq.turns), messages=messages
            )
        )
    return out
