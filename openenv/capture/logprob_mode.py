"""What a recorded logprob means, how an engine is asked, and which turns a trainer may use.

A recorded logprob exists for one use: the trainer compares it with its own log-probability of the same
token (importance sampling, KL, off-policy correction), and TRL computes that as
`log_softmax(logits / temperature)` over the full vocabulary. So a recorded logprob must be the one the
token was **sampled** with, temperature applied. An engine reports one of:

- `processed`: `log_softmax(logits / T)` of the distribution it sampled from (vLLM started with
  `--logprobs-mode processed_logprobs`; our `LocalBackend` by construction);
- `raw`: `log_softmax(logits)`, temperature not applied (vLLM's default `raw_logprobs`). Equal to the
  sampling distribution's only at `T = 1`;
- `unknown`: not known (a journal written before turns recorded it, an engine that could not be probed).

The verdict is the engine's, learned once per engine at its first use (`VLLMBackend.logprob_mode`:
the top-2 logprob gap of one prompt at `T = 1` and at `T = 2`; a processed engine halves it, a raw one
does not) and recorded on every turn and row. `require_trainable_engine` refuses a training session at a
temperature other than 1 on an engine that is not `processed`; an evaluation session runs and its rows
say `trainable: false`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any, Literal

from openenv.capture.canonical import SamplingParams
from openenv.capture.sampling_policy import SamplingPolicy, truncating_fields
from openenv.errors import BadRequest

__all__ = [
    "PROCESSED_FLAG",
    "LogprobMode",
    "UntrainableEngine",
    "engine_logprob_mode",
    "exact_for_training",
    "logprob_meaning",
    "needs_processed",
    "require_trainable_engine",
    "row_logprob_mode",
    "verdict_from_gaps",
]

LogprobMode = Literal["processed", "raw", "unknown"]
# The vLLM flag that makes its sampled-token logprobs the sampling distribution's (vllm/config/model.py:
# "Processed means the values after applying all processors, including temperature and top_k/top_p").
PROCESSED_FLAG = ("--logprobs-mode", "processed_logprobs")
_HOW = (
    "start vLLM with `--logprobs-mode processed_logprobs` (openenv.testing.VLLMServer does), use the local "
    "backend, or sample at temperature 1"
)


class UntrainableEngine(BadRequest):
    """Raised when a training session would record logprobs that are not its sampling distribution's."""

    code = "untrainable_engine"


async def engine_logprob_mode(backend: object) -> LogprobMode:
    """The backend's verdict (probed once per engine and cached by the backend), or `unknown` for a backend
    that cannot tell."""
    probe = getattr(backend, "logprob_mode", None)
    if probe is None:
        return "unknown"
    mode = await probe()
    return mode if mode in ("processed", "raw") else "unknown"


def verdict_from_gaps(gap_t1: float, gap_t2: float) -> LogprobMode:
    """The probe's rule: the gap between the two likeliest tokens' logprobs at `T = 1` and at `T = 2`.
    `log_softmax(z / T)` divides every logit difference by T, so a processed engine's gap halves and a raw
    engine's stays; a gap too small to measure (a tie) decides nothing."""
    if not (math.isfinite(gap_t1) and math.isfinite(gap_t2)) or gap_t1 < 1e-3:
        return "unknown"
    ratio = gap_t2 / gap_t1
    if abs(ratio - 0.5) < 0.05:
        return "processed"
    if abs(ratio - 1.0) < 0.05:
        return "raw"
    return "unknown"


def exact_for_training(mode: LogprobMode, params: SamplingParams | None) -> bool:
    """Whether logprobs recorded in `mode` under `params` equal the trainer's `log_softmax(logits / T)` over
    the full vocabulary: a temperature above 0, nothing that truncates the distribution, and an engine that
    applied the temperature (or `T = 1`, where raw and processed agree)."""
    temperature = 1.0 if params is None or params.temperature is None else params.temperature
    if temperature <= 0 or (params is not None and truncating_fields(params)):
        return False
    return mode == "processed" or (mode == "raw" and temperature == 1.0)


def needs_processed(params: SamplingParams | None, *, policy: SamplingPolicy) -> bool:
    """Whether a session trains (`policy="trainer"` with sampling of its own) at a temperature where raw and
    processed logprobs differ (above 0, other than 1): only then must the engine be `processed`."""
    if policy != "trainer" or params is None or params.temperature is None:
        return False
    return params.temperature > 0 and params.temperature != 1.0


def require_trainable_engine(
    mode: LogprobMode, params: SamplingParams | None, *, policy: SamplingPolicy, engine: str = "the engine"
) -> None:
    """Refuse a training session (`policy="trainer"` with sampling of its own) whose logprobs would not be its
    sampling distribution's: a temperature other than 1 on an engine that is not `processed`. An evaluation
    session (`policy="request"`) is never refused; its rows say `trainable: false`.

    Raises:
        UntrainableEngine: one line that says how to start vLLM.
    """
    if not needs_processed(params, policy=policy) or mode == "processed":
        return
    assert params is not None and params.temperature is not None
    temperature = params.temperature
    raise UntrainableEngine(
        f"{engine} returns {mode} logprobs, not log_softmax(logits / {temperature:g}), so a "
        f"training session at temperature {temperature:g} would record the wrong "
        f"distribution's logprobs; {_HOW}",
        param="temperature",
    )


def logprob_meaning(parts: Sequence[Any]) -> dict[str, Any]:
    """The temperature, mode and trainability of a whole made of parts that each have them (a row's turns,
    an episode's rows): the common temperature (None if they differ), `row_logprob_mode` of their modes,
    and trainable only if every part is (and there is one)."""
    temperatures = {part.temperature for part in parts}
    return {
        "temperature": temperatures.pop() if len(temperatures) == 1 else None,
        "logprob_mode": row_logprob_mode(part.logprob_mode for part in parts),
        "trainable": bool(parts) and all(part.trainable for part in parts),
    }


def row_logprob_mode(modes: Iterable[LogprobMode]) -> LogprobMode:
    """One sequence's mode from its turns': `unknown` if any is, else `raw` if any is, else `processed`."""
    seen = set(modes)
    if not seen or "unknown" in seen:
        return "unknown"
    return "raw" if "raw" in seen else "processed"
