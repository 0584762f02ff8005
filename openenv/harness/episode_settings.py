"""How an episode runs, as one value: `EpisodeSettings`.

Where the harness runs (sandbox, network, isolation), how its turns are sampled, how long it may take
and what it may spend: these are the same whichever road an episode comes by (`openenv run`, `openenv
eval`, a training run's jobs on threads or Ray workers, a soak, a served env). Each road's config holds
one `EpisodeSettings` and hands it to `HarnessEnvironment(settings=...)`, so a setting is declared,
validated and documented here once, and a new one reaches every road by being added here.

Which engine samples is the other value an episode needs (`openenv.capture.engine.EngineSpec`); the
task and the policy are the episode's own, chosen per reset.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Literal, cast, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from openenv.capture.budget import Budget
from openenv.capture.canonical import SamplingParams
from openenv.capture.sampling_policy import SamplingPolicy, training_sampling
from openenv.errors import BadRequest
from openenv.harness.verifier import RewardRule
from openenv.settings import flag

__all__ = [
    "DEFAULT_SAMPLING",
    "EpisodeSettings",
    "Isolation",
    "Network",
    "Pull",
    "SandboxKind",
    "fold_words",
]

# A short cap keeps sampled turns of a tiny or untrained model cheap; set `sampling` to change it.
DEFAULT_SAMPLING = SamplingParams(max_tokens=256, temperature=1.0)
Network = Literal["auto", "host", "loopback"]
SandboxKind = Literal["local", "docker"]
Isolation = Literal["bwrap", "container", "none"]
Pull = Literal["missing", "always", "never"]


class EpisodeSettings(BaseModel):
    """Everything about how an episode runs that is not its engine, task or policy.

    Args:
        sandbox: `local` (a `LocalSandbox` with `network`) or `docker` (a `DockerSandbox` per episode,
            graded in a fresh container); a reset option of the same name overrides it per episode.
        network: `loopback` (or `auto`, the same) runs the harness in a network namespace with only the
            proxy reachable; `host` (explicit, warned on every episode) shares this machine's network.
        isolation: `bwrap` walls a local sandbox in (unprivileged uid, namespaces, cgroup); `container`
            runs the harness as a plain subprocess where the container is the boundary (a Space: no
            capability, default seccomp; `sandbox/container.py`, refused outside a container); `none` runs
            the harness on the host (explicit, warned on every episode); None: `$OPENENV_SANDBOX_ISOLATION`,
            else `bwrap`. A machine that cannot isolate is refused with the missing piece named.
        sampling: sampling settings that override the harness's (None: the harness's own).
        sampling_policy: `trainer` (default: a training session; its turns sample with `sampling` only, which
            may set a temperature and an output cap but nothing that truncates the distribution, and a
            temperature other than 1 needs an engine whose logprobs are processed) or `request` (evaluation:
            the harness's own fields pass, `top_p` and the like allowed; rows say whether they are trainable).
        timeout_s: the harness's wall-clock budget per episode (None: the task's); a reset option of the
            same name overrides it.
        turn_timeout_s: the longest one `sample`/`complete` step may take.
        budget: caps on each episode's turns, sampled tokens and context (`capture/budget.py`); a task's
            own budget and a reset option of the same name combine with it (the tightest cap wins).
        image_substitutes: `{missing image: image to use}` for Docker tasks whose image (FROM or
            docker_image) is not in the engine; each use is reported in the episode's notes.
        local_without_build: run tasks whose Dockerfile has steps only a build can reproduce (RUN, files
            outside the workdir, a docker_image) in the local sandbox anyway, without those steps; None:
            `$OPENENV_LOCAL_WITHOUT_BUILD`, else they are refused with a pointer to `sandbox="docker"`.
        reward_rule: how the verifier's dict becomes the scalar reward (`RewardRule`; None: all tests pass).
        pull: when the Docker sandbox pulls a task's image (`docker_image` or FROM): `missing` (as
            Docker's default), `always` (the registry is asked again, once per process and image) or
            `never` (offline: a missing image is an error naming the ways out); None: `$OPENENV_PULL`,
            else `missing`.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    sandbox: SandboxKind = "local"
    network: Network = "auto"
    isolation: Isolation | None = None
    sampling: SamplingParams | None = DEFAULT_SAMPLING
    sampling_policy: SamplingPolicy = "trainer"
    timeout_s: float | None = Field(default=None, gt=0)
    turn_timeout_s: float = Field(default=300.0, gt=0)
    budget: Budget | None = None
    image_substitutes: dict[str, str] = Field(default_factory=dict)
    local_without_build: bool | None = None
    pull: Pull | None = None
    reward_rule: RewardRule | None = None

    @field_validator("sandbox", mode="before")
    @classmethod
    def _known_sandbox(cls, kind: object) -> object:
        if kind not in ("local", "docker"):
            raise ValueError(f"sandbox must be 'local' or 'docker', got {kind!r}")
        return kind

    @field_validator("sampling")
    @classmethod
    def _sane_sampling(cls, sampling: SamplingParams | None) -> SamplingParams | None:
        if sampling is not None and sampling.max_tokens is not None and sampling.max_tokens <= 0:
            raise ValueError(f"max_tokens must be above 0, got {sampling.max_tokens}")
        if sampling is not None and sampling.temperature is not None and sampling.temperature < 0:
            raise ValueError(f"temperature must be 0 or above, got {sampling.temperature}")
        return sampling

    @model_validator(mode="after")
    def _training_sampling(self) -> EpisodeSettings:
        if self.sampling_policy == "trainer":
            try:
                training_sampling(self.sampling)
            except BadRequest as exc:
                raise ValueError(exc.message) from None
        return self

    def sampled_with(
        self, *, max_tokens: int | None = None, temperature: float | None = None
    ) -> EpisodeSettings:
        """These settings with the sampling's `max_tokens` / `temperature` replaced where given (the two
        a run's config and the CLI set on their own)."""
        changes = {
            k: v for k, v in {"max_tokens": max_tokens, "temperature": temperature}.items() if v is not None
        }
        if not changes:
            return self
        sampling = {**(self.sampling or SamplingParams()).model_dump(), **changes}
        return EpisodeSettings.model_validate({**dict(self), "sampling": sampling})

    # ---- what a None means, read where an episode needs it (a served env is configured by its image's
    # environment, so these are read at the episode, not when the settings or the env are built)

    def isolation_in_effect(self) -> Isolation:
        """`isolation`, else `$OPENENV_SANDBOX_ISOLATION`, else `bwrap`.

        Raises:
            BadRequest: the variable names no isolation.
        """
        if self.isolation is not None:
            return self.isolation
        value = os.environ.get("OPENENV_SANDBOX_ISOLATION") or "bwrap"
        if value not in get_args(Isolation):
            allowed = ", ".join(get_args(Isolation))
            raise BadRequest(f"OPENENV_SANDBOX_ISOLATION={value!r}: expected one of {allowed}")
        return cast(Isolation, value)

    def network_in_effect(self) -> Literal["host", "loopback"]:
        """`network`, with `auto` meaning `loopback`."""
        return "loopback" if self.network == "auto" else self.network

    def local_without_build_in_effect(self) -> bool:
        """`local_without_build`, else `$OPENENV_LOCAL_WITHOUT_BUILD`."""
        if self.local_without_build is not None:
            return self.local_without_build
        return flag("OPENENV_LOCAL_WITHOUT_BUILD")

    def reward_rule_in_effect(self) -> RewardRule:
        return self.reward_rule or RewardRule()


_SAMPLING_WORDS = ("max_tokens", "temperature")
_ENGINE_WORDS = ("backend", "model", "vllm_url")


def fold_words(
    data: Any,
    *,
    settings: str = "settings",
    engine: str | None = None,
    renames: Mapping[str, str] | None = None,
) -> Any:
    """The one place words become the two values: a config's `EpisodeSettings` given as flat keywords
    (`RolloutConfig(sandbox="docker", max_tokens=64)`) moved into its `settings` field, over what that field
    already holds, and, where `engine` names the config's `EngineSpec` field (the CLI and MCP edge, which
    take the engine as `--backend`/`--model`/`--vllm-url`), the engine words made into
    `EngineSpec.of(backend, model=, vllm_url=)`. A config uses it as its `model_validator(mode="before")`
    without `engine` (below the edge an engine is an `EngineSpec`; an engine word is then an unknown field).

    Every `EpisodeSettings` field name is a settings word, and so are `max_tokens` and `temperature` (into
    `sampling`); `renames` maps a config's own spelling to a field (`{"episode_timeout_s": "timeout_s"}`).
    A word given as None is not given.

    Raises:
        ValueError: both the engine field and engine words are given (pydantic names it).
        BadRequest: an unknown backend name.
    """
    if not isinstance(data, dict):
        return data
    data = dict(data)
    if engine is not None:
        data = _fold_engine(data, engine)
    names = {name: name for name in (*EpisodeSettings.model_fields, *_SAMPLING_WORDS)} | dict(renames or {})
    names.pop(settings, None)
    words = {names[key]: data.pop(key) for key in list(data) if key in names}
    words = {name: value for name, value in words.items() if value is not None}
    if not words:
        return data
    base = data.get(settings)
    base = base if isinstance(base, EpisodeSettings) else EpisodeSettings.model_validate(base or {})
    sampling = {name: words.pop(name) for name in _SAMPLING_WORDS if name in words}
    folded = EpisodeSettings.model_validate({**dict(base), **words}) if words else base
    data[settings] = folded.sampled_with(**sampling)
    return data


def _fold_engine(data: dict[str, Any], field: str) -> dict[str, Any]:
    from openenv.capture.engine import EngineSpec

    words = {name: data.pop(name) for name in _ENGINE_WORDS if name in data}
    if data.get(field) is not None:
        if any(value is not None for value in words.values()):
            raise ValueError(f"pass {field}= or {'/'.join(f'{w}=' for w in _ENGINE_WORDS)}, not both")
        return data
    data[field] = EngineSpec.of(
        words.get("backend"), model=words.get("model"), vllm_url=words.get("vllm_url")
    )
    return data
