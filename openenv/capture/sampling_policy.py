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

The trainer's own sampling is checked too (`training_sampling`, at configuration time): a training policy
samples the full vocabulary at its temperature, because the trainer recomputes each token's logprob as
`log_softmax(logits / temperature)` over the whole vocabulary. `top_p < 1`, `top_k`, `min_p`, penalties
and a JSON schema would sample from a distribution the trainer's loss never sees, so they are refused,
naming the field; an evaluation session (`policy="request"`) keeps them.
"""

from __future__ import annotations

from typing import Literal

from openenv.capture.canonical import SamplingParams
from openenv.errors import BadRequest

__all__ = ["SamplingPolicy", "effective_params", "training_sampling", "truncating_fields"]

SamplingPolicy = Literal["trainer", "request"]
# What a request may still set in a training session: an output cap only truncates the policy's sample.
_REQUEST_MAY_SET = frozenset({"max_tokens"})
# Why each field would make the sampled distribution differ from the trainer's log_softmax(logits / T).
_TRUNCATING = {
    "top_p": "renormalizes over the smallest set of tokens whose mass reaches top_p",
    "top_k": "renormalizes over the k likeliest tokens",
    "min_p": "drops tokens below min_p times the likeliest token's probability",
    "presence_penalty": "shifts the logits of tokens already present",
    "frequency_penalty": "shifts the logits of tokens by how often they occurred",
    "repetition_penalty": "rescales the logits of tokens already present",
    "json_schema": "masks every token the schema does not allow",
}


def truncating_fields(params: SamplingParams) -> tuple[str, ...]:
    """The fields of `params` that make its sampling distribution other than `softmax(logits / T)` over the
    full vocabulary (values that change nothing, such as `top_p=1` or `top_k=-1`, are not counted)."""
    neutral: dict[str, tuple[object, ...]] = {
        "top_p": (None, 1.0),
        "top_k": (None, 0, -1),
        "min_p": (None, 0.0),
        "presence_penalty": (None, 0.0),
        "frequency_penalty": (None, 0.0),
        "repetition_penalty": (None, 1.0),
        "json_schema": (None,),
    }
    return tuple(name for name in _TRUNCATING if getattr(params, name) not in neutral[name])


def training_sampling(params: SamplingParams | None) -> SamplingParams | None:
    """`params`, checked as a training policy's sampling: a temperature and an output cap (plus `seed` and
    `stop`, which end or fix a sample without changing its distribution), nothing that truncates or reshapes
    the distribution. Call it wherever a training policy's sampling is configured (a session, a rollout, an
    env server), so the refusal comes before any episode runs.

    Raises:
        BadRequest: a field such as `top_p < 1`, `top_k` or `min_p` is set; the message names it and why.
    """
    if params is None:
        return None
    bad = truncating_fields(params)
    if bad:
        name = bad[0]
        raise BadRequest(
            f"a training policy samples the full vocabulary at its temperature, but sampling sets "
            f"{name}={getattr(params, name)!r}, which {_TRUNCATING[name]}: the trainer's loss "
            f"recomputes log_softmax(logits / temperature) and would see a distribution the engine "
            f"did not sample; remove {name} (or evaluate with policy='request')",
            param=name,
        )
    return params


def effective_params(
    requested: SamplingParams, trainer: SamplingParams | None, *, policy: SamplingPolicy, aux: bool
) -> tuple[SamplingParams, tuple[str, ...]]:
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
    overridden = tuple(
        sorted(
            name
            for name, value in asked.items()
            if name not in _REQUEST_MAY_SET and chosen.get(name) != value
        )
    )
    kept = {name: asked[name] for name in _REQUEST_MAY_SET if name in asked and getattr(base, name) is None}
    return base.model_copy(update=kept), overridden
