"""Whose sampling parameters a trained turn is sampled under: the trainer's, never the request's.

The agent can reach its own proxy session (it runs the harness's shell), and a request's sampling fields
used to pass through to the engine: a Gemini request with `responseJsonSchema={"enum": ["ATTACKER
CHOSEN"]}` and `topK: 1` came back as trained tokens (`env_mask` 1) with logprobs near 0, text the policy
never chose (issue 30, finding 7). So in a training session (`policy="trainer"`, the default) a model
turn is sampled with the trainer's settings (the session's `sampling`) and nothing else from the request
but `max_tokens` (clamped to the context anyway; it only cuts a reply short, and a cut is marked
`length`): `top_k`, `min_p`, penalties, `stop`, `seed`, a JSON schema the trainer did not choose are
dropped, a temperature or `top_p` the trainer set wins. The turn records which request fields were
overridden (`Turn.overridden`), so a trainer can see, or mask, turns whose request asked for more.

We override rather than refuse: harnesses send such fields routinely (stop lists, seeds, their own
temperature), and a refusal would end real episodes; what matters for training, that every trained token
was sampled by the policy under the trainer's parameters, holds either way. Auxiliary turns (titles,
routers) are never trained, so their requests keep their fields, and so does a session with no sampling
settings of its own (no trainer chose any: a plain serving proxy; `HarnessEnvironment` always sets them).
`policy="request"` is the explicit opt-out for serving and evaluation proxies that do set some.
"""

from __future__ import annotations

from typing import Literal

from openenv.capture.canonical import SamplingParams

__all__ = ["SamplingPolicy", "effective_params"]

SamplingPolicy = Literal["trainer", "request"]
# What a request may still set in a training session: an output cap only truncates the policy's sample.
_REQUEST_MAY_SET = frozenset({"max_tokens"})


def effective_params(requested: SamplingParams, trainer: SamplingParams | None, *, policy: SamplingPolicy,
                     aux: bool) -> tuple[SamplingParams, tuple[str, ...]]:
    """The parameters to sample with, and the names of the request's fields that were overridden.

    `request` policy, auxiliary turns and sessions without settings: the request's fields with the
    trainer's on top (the old rule: the proxy wins where it set something). `trainer` policy: the trainer's fields, plus the request's
    `max_tokens` where the trainer set none.
    """
    if policy == "request" or aux or trainer is None:
        return requested.merged(trainer), ()
    base = trainer
    asked = requested.model_dump(exclude_defaults=True)
    chosen = base.model_dump()
    overridden = tuple(sorted(name for name, value in asked.items()
                              if name not in _REQUEST_MAY_SET and chosen.get(name) != value))
    kept = {name: asked[name] for name in _REQUEST_MAY_SET if name in asked and getattr(base, name) is None}
    return base.model_copy(update=kept), overridden
