"""The Gymnasium spaces of a harness env: `gymnasium.make("openenv/Pi-v0")` and every other harness id.

A step is one model turn of the real harness, as in `HarnessEnvironment`:

action       Dict(kind=Discrete(3), text=UnicodeText(reply_length))
             kind 0 `sample`: the backend samples the reply (text is ignored);
             kind 1 `complete`: `text` is the reply (tokenized, end-of-turn added, scored for logprobs);
             kind 2 `run`: the backend samples every remaining turn; the step returns at the end.
observation  Dict(prompt_ids=Sequence(Discrete(vocab_size), stack=True): the exact ids the reply is
                  conditioned on (empty at the end),
                  prompt=UnicodeText: those ids decoded, i.e. the prompt as the chat template rendered it,
                  last_reply=UnicodeText: the previous turn's text as the harness received it,
                  turns, tool_calls=Box(int64, shape ()): main turns and tool calls so far)
reward       0 until the end; then the verifier's scalar reward (0 when it produced none: see info).
terminated   the harness exited and the verifier ran. Never truncated (the harness's own timeout ends it).
info         request (the pending request: canonical messages, tools, sampling), aux (an auxiliary
             request such as a title generator: answer it, it is not trained on), turn_id, last_turn
             (token ids, logprobs, tool calls); at the end reward_breakdown, reward_status,
             no_reward_reason, sequences (training rows: prompt_ids, completion_ids, logprobs, env_mask)
             and stats.

Reset options go through unchanged: `env.reset(options={"task": "fix-binary-search"})`; without a
task, the seed picks a built-in one.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

from openenv.core.types import Observation
from openenv.gym import GymSpec, UnicodeText
from openenv.harness.models import HarnessObservation

__all__ = ["KINDS", "from_observation", "harness_gym_spec", "info", "to_action"]

KINDS = ("sample", "complete", "run")
_COUNT = spaces.Box(0, np.iinfo(np.int64).max, shape=(), dtype=np.int64)


def harness_gym_spec(
    *, vocab_size: int = 2**31 - 1, reply_length: int = 8192, prompt_length: int = 1 << 22
) -> GymSpec:
    """The harness env's `GymSpec`.

    Args:
        vocab_size: the bound of token ids in `prompt_ids` (the model's vocabulary; by default any id).
        reply_length: the longest `text` reply the action space holds (samples stay short).
        prompt_length: the longest rendered prompt the observation space holds.
    """
    action_space = spaces.Dict({"kind": spaces.Discrete(len(KINDS)), "text": UnicodeText(reply_length)})
    observation_space = spaces.Dict(
        {
            "prompt_ids": spaces.Sequence(spaces.Discrete(vocab_size), stack=True),
            "prompt": UnicodeText(prompt_length),
            "last_reply": UnicodeText(prompt_length),
            "turns": _COUNT,
            "tool_calls": _COUNT,
        }
    )
    return GymSpec(action_space, observation_space, to_action, from_observation, info, nondeterministic=True)


def to_action(action: dict[str, Any]) -> dict[str, Any]:
    """A member of the action space -> `HarnessAction` fields."""
    kind = KINDS[int(action["kind"])]
    return {"kind": kind, "text": str(action.get("text", ""))} if kind == "complete" else {"kind": kind}


def _harness(obs: Observation) -> HarnessObservation:
    if not isinstance(obs, HarnessObservation):
        raise TypeError(f"expected a HarnessObservation, got {type(obs).__name__}")
    return obs


def from_observation(obs: Observation) -> dict[str, Any]:
    """A `HarnessObservation` -> a member of the observation space (fresh arrays every call)."""
    harness = _harness(obs)
    pending = harness.pending
    return {
        "prompt_ids": np.asarray(pending.prompt_ids if pending else [], dtype=np.int64),
        "prompt": pending.text if pending else "",
        "last_reply": harness.last_turn.text if harness.last_turn else "",
        "turns": np.asarray(harness.turns, dtype=np.int64),
        "tool_calls": np.asarray(harness.tool_calls, dtype=np.int64),
    }


def info(obs: Observation) -> dict[str, Any]:
    """What a policy or trainer needs beside the spaces: the structured request, and the rows at the end."""
    harness = _harness(obs)
    out: dict[str, Any] = {}
    if harness.pending is not None:
        out |= {
            "request": harness.pending.request.model_dump(mode="json"),
            "aux": harness.pending.aux,
            "turn_id": harness.pending.turn_id,
        }
    if harness.last_turn is not None:
        out["last_turn"] = harness.last_turn.model_dump(mode="json")
    if harness.done:
        out |= {
            "reward_breakdown": dict(harness.reward_breakdown or {}),
            "reward_status": harness.reward_status,
            "no_reward_reason": harness.no_reward_reason,
            "sequences": [row.model_dump(mode="json") for row in harness.sequences or []],
            "stats": harness.stats.model_dump(mode="json") if harness.stats else None,
        }
    return out
