"""What a `run_rollout` call may ask of this server, checked before anything starts.

Every refusal is a `BadRequest` naming the argument and what this server offers instead; the
reference's client raises it as `RuntimeError("tool 'run_rollout' failed: ...")`, so a trainer
misconfigured against this server stops loudly instead of training on nothing. (An episode that our
side fails after it started is not a refusal: that is an `ok=False` result.)

Three checks guard the server, not just the wire:

- `llm_url` is a request forgery vector: a client that names any URL makes this server connect there
  (a cloud metadata address, an internal service) and feed the answer to a harness. A rollout may name
  only an engine the server was started with or one the operator allow-listed (`--allow-llm-url`).
- `sandbox` takes only what runs here (`local`, `docker`); the reference's hosted backends are refused by
  name, with this server's list, rather than quietly run somewhere else.
- `sampling` is the training policy: a temperature and an output cap. Truncating or distorting knobs
  (top-p, top-k, min-p, penalties) would make the recorded logprobs differ from what the trainer
  recomputes over the full vocabulary, so they are accepted only at their no-op values.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

from openenv.capture.budget import Budget
from openenv.capture.canonical import SamplingParams
from openenv.capture.engine import EngineSpec
from openenv.errors import BadRequest
from openenv.harness.catalog import harness_names

__all__ = [
    "ORACLE",
    "REFERENCE_SANDBOXES",
    "SANDBOXES",
    "Admitted",
    "RolloutPolicy",
    "check_training_sampling",
]

ORACLE = "oracle"
SANDBOXES = ("local", "docker")
# The reference's Harbor backends that this server does not run (Harbor registers more; any other name is
# refused the same way).
REFERENCE_SANDBOXES = ("e2b", "modal", "daytona", "runloop", "gke", "hf-sandbox")
# Knobs that narrow or distort the sampling distribution, with their no-op values (as the reference's
# `capture.upstream.NON_POLICY_SAMPLING`: TRL's worker sends them at these values).
NEUTRAL_SAMPLING: dict[str, float] = {
    "top_p": 1.0,
    "top_k": -1,
    "min_p": 0.0,
    "frequency_penalty": 0.0,
    "presence_penalty": 0.0,
    "repetition_penalty": 1.0,
}
Purpose = Literal["train", "eval"]


def check_training_sampling(sampling: dict[str, Any] | None) -> SamplingParams | None:
    """The training policy a rollout asks for, as our `SamplingParams` (temperature and output cap).

    Raises:
        BadRequest: not an object; an unknown field; a non-finite or non-positive temperature; a
            truncating knob at anything but its no-op value (top_k 0 counts as off, as vLLM's -1).
    """
    if sampling is None:
        return None
    if not isinstance(sampling, dict):
        raise BadRequest('sampling must be a JSON object, e.g. {"temperature": 1.0}')
    unknown = sorted(set(sampling) - {"temperature", "max_tokens", *NEUTRAL_SAMPLING})
    if unknown:
        raise BadRequest(
            f"sampling field(s) {', '.join(unknown)} are not a training policy; this server takes "
            "temperature and max_tokens (and the truncating knobs only at their no-op values)"
        )
    for key, neutral in NEUTRAL_SAMPLING.items():
        if key not in sampling:
            continue
        value = sampling[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise BadRequest(f"sampling {key} must be a number")
        if not (value == neutral or (key == "top_k" and value == 0)):
            raise BadRequest(
                f"sampling {key}={value} truncates or distorts the policy, so the recorded logprobs "
                f"would not be the trainer's; a training rollout takes {key}={neutral} (or leave it out)"
            )
    temperature = sampling.get("temperature")
    if temperature is not None and (
        isinstance(temperature, bool)
        or not isinstance(temperature, (int, float))
        or not math.isfinite(temperature)
        or temperature <= 0
    ):
        raise BadRequest(f"sampling temperature must be a finite number above 0, got {temperature!r}")
    max_tokens = sampling.get("max_tokens")
    if max_tokens is not None and (
        isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1
    ):
        raise BadRequest(f"sampling max_tokens must be a whole number above 0, got {max_tokens!r}")
    return SamplingParams(
        temperature=None if temperature is None else float(temperature), max_tokens=max_tokens
    )


def _url_key(url: str) -> str:
    """An engine URL compared as the server uses it: no trailing slash, no `/v1` suffix."""
    base = url.strip().rstrip("/")
    return base.removesuffix("/v1")


@dataclass(frozen=True)
class Admitted:
    """A rollout request that passed every check: what the episode runs with."""

    harness: str  # the harness that runs (for `oracle`: the server's oracle harness)
    policy: Literal["sample", "oracle"]
    sandbox: str
    engine: EngineSpec
    sampling: SamplingParams | None
    timeout_s: float | None
    budget: Budget | None
    purpose: Purpose
    findings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class RolloutPolicy:
    """The operator's rules for rollouts (from `openenv serve harbor`'s options)."""

    engine: EngineSpec
    allowed_llm_urls: tuple[str, ...] = ()
    oracle_harness: str = "pi"
    default_sampling: SamplingParams | None = None
    image_substitutes: tuple[tuple[str, str], ...] = ()  # Docker: (missing image, image to run instead)

    def admit(self, args: dict[str, Any]) -> Admitted:
        """Check one `run_rollout`'s arguments (the reference client's names).

        Raises:
            BadRequest: the first argument this server refuses, with the reason and what it offers.
        """
        harness = str(args.get("harness") or "")
        names = harness_names()
        if harness != ORACLE and harness not in names:
            raise BadRequest(
                f"harness {harness!r} is not one this server runs; it runs: {ORACLE}, {', '.join(names)}"
            )
        sandbox = str(args.get("sandbox") or "")
        if sandbox not in SANDBOXES:
            hosted = (
                " (a hosted backend of the reference's; this server runs episodes on its own machine)"
                if sandbox in REFERENCE_SANDBOXES
                else ""
            )
            raise BadRequest(
                f"sandbox {sandbox!r} is not offered here{hosted}; this server offers: {', '.join(SANDBOXES)}"
            )
        if args.get("keep_sandbox"):
            raise BadRequest("keep_sandbox is not offered: every episode's sandbox is removed when it ends")
        provider = args.get("provider", "openai")
        if provider != "openai":
            raise BadRequest(
                f"provider {provider!r} is not offered: this server samples from its own engines"
            )
        if args.get("api_key") or args.get("auth_header"):
            raise BadRequest("api_key/auth_header are not taken: the operator configures engine credentials")
        engine = self._engine(str(args.get("llm_url") or ""))
        model = str(args.get("model") or "")
        if model and model not in self._model_names(engine):
            raise BadRequest(
                f"model {model!r} is not what this server renders with "
                f"({', '.join(self._model_names(engine))}); leave model empty"
            )
        purpose_word = str(args.get("purpose") or "auto")
        if purpose_word not in ("auto", "train", "eval"):
            raise BadRequest(f"purpose {purpose_word!r}: expected auto, train or eval")
        purpose: Purpose = "eval" if purpose_word == "eval" else "train"
        if purpose == "eval":
            sampling = self._eval_sampling(args.get("eval_sampling"))
        else:
            if args.get("eval_sampling") is not None:
                raise BadRequest("eval_sampling goes with purpose='eval'; a training rollout takes sampling=")
            sampling = check_training_sampling(args.get("sampling"))
        timeout = args.get("agent_timeout_sec") or 0
        if (
            isinstance(timeout, bool)
            or not isinstance(timeout, (int, float))
            or timeout < 0
            or not math.isfinite(timeout)
        ):
            raise BadRequest(
                f"agent_timeout_sec must be 0 (the task's) or a number of seconds, got {timeout!r}"
            )
        steps = args.get("agent_step_limit") or 0
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
            raise BadRequest(f"agent_step_limit must be 0 (no cap) or a whole number, got {steps!r}")
        findings = []
        if args.get("force_build"):
            findings.append("force_build ignored: a task image is built once per content and reused")
        return Admitted(
            harness=self.oracle_harness if harness == ORACLE else harness,
            policy="oracle" if harness == ORACLE else "sample",
            sandbox=sandbox,
            engine=engine,
            sampling=self.default_sampling.merged(sampling)
            if self.default_sampling and sampling
            else (sampling or self.default_sampling),
            timeout_s=float(timeout) or None,
            budget=Budget(max_turns=steps) if steps else None,
            purpose=purpose,
            findings=findings,
        )

    def _engine(self, llm_url: str) -> EngineSpec:
        if not llm_url:
            return self.engine
        key = _url_key(llm_url)
        if key in {_url_key(u) for u in self.engine.vllm_urls}:
            return self.engine
        if key in {_url_key(u) for u in self.allowed_llm_urls}:
            return EngineSpec(backend="vllm", model=self.engine.model, vllm_urls=(key,))
        offered = [*self.engine.vllm_urls, *self.allowed_llm_urls]
        raise BadRequest(
            f"llm_url {llm_url!r} is not an engine this server may connect to (a client cannot point "
            "the server at an address its operator did not allow); "
            + (
                f"allowed: {', '.join(offered)}"
                if offered
                else "leave llm_url empty to use the server's own engine"
            )
            + " (the operator adds engines with --allow-llm-url)"
        )

    def _model_names(self, engine: EngineSpec) -> list[str]:
        folder = str(engine.folder())
        return [folder, folder.rstrip("/").rsplit("/", 1)[-1]]

    @staticmethod
    def _eval_sampling(given: Any) -> SamplingParams | None:
        if given is None:
            return None
        if not isinstance(given, dict):
            raise BadRequest("eval_sampling must be a JSON object")
        allowed = {"temperature", "max_tokens", "top_p", "top_k", "min_p"}
        unknown = sorted(set(given) - allowed)
        if unknown:
            raise BadRequest(
                f"eval_sampling field(s) {', '.join(unknown)} are not taken; allowed: "
                f"{', '.join(sorted(allowed))}"
            )
        try:
            return SamplingParams(**given)
        except ValueError as exc:
            raise BadRequest(f"eval_sampling: {exc}") from None
