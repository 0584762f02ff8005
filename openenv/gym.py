"""A `gymnasium.Env` over any openenv client, and `gymnasium.register` ids for the discoverable envs.

Importing this module registers `openenv/<Name>-v0` for every env `openenv list` shows (so
`gymnasium.make("openenv/Echo-v0")` works; `gymnasium.make("openenv.gym:openenv/Echo-v0")` imports it
for you) and `openenv/Env-v0`, which takes `env=` (a name, folder, URL, `docker:IMAGE` or Space id).

Spaces come from the env's models (or, for a server known only by URL, the JSON Schemas it serves):
each string field is a `Text` space, integer/number a scalar `Box`, boolean a `Discrete(2)`. Envs with
other field types pass their own spaces and converters, or an env family registers a `GymSpec` for its
action model (the harness envs' is `openenv.harness.gym`: a reply or "let the backend sample" as the
action, the pending prompt's ids and text as the observation, training rows in `info`).
"""

from __future__ import annotations

import string
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gymnasium
import httpx
import numpy as np
from gymnasium import spaces
from pydantic import BaseModel

from openenv.auto import AutoEnv, discover_envs
from openenv.client import AnyObservation, SyncEnvClient
from openenv.core.auth import auth_headers
from openenv.core.types import Observation
from openenv.manifest import import_object
from openenv.resources import find_env_dir

__all__ = [
    "GENERIC_ID",
    "GymSpec",
    "OpenEnvGym",
    "UnicodeText",
    "gym_id",
    "gym_spec_for",
    "make_env",
    "register_envs",
    "space_for_model",
    "space_for_schema",
]

GENERIC_ID = "openenv/Env-v0"
_OBS_BOOKKEEPING = frozenset({"done", "reward", "metadata"})
_INT = np.iinfo(np.int64)

GymDict = dict[str, Any]


class UnicodeText(spaces.Text):
    """A `Text` space whose members are any Unicode string of an allowed length.

    gymnasium's `Text` only contains strings drawn from its charset; prompts and replies hold any
    character. Samples are drawn from printable ASCII (letters, digits, punctuation, whitespace).
    """

    def __init__(
        self, max_length: int, *, min_length: int = 0, seed: int | np.random.Generator | None = None
    ):
        super().__init__(max_length, min_length=min_length, charset=string.printable, seed=seed)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"UnicodeText({self.min_length}, {self.max_length})"

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, UnicodeText)
            and self.min_length == other.min_length
            and self.max_length == other.max_length
        )


@dataclass(frozen=True)
class GymSpec:
    """The Gymnasium view of an env family whose models have no default spaces.

    `to_action` turns a member of `action_space` into the action's fields; `from_observation` turns an
    observation into a member of `observation_space`; `info` adds to each step's info dict.
    `nondeterministic`: the same seed and action need not give the same observation (real processes,
    sampling), which tells gymnasium's checker to skip its determinism checks.
    """

    action_space: spaces.Space[Any]
    observation_space: spaces.Space[Any]
    to_action: Callable[[Any], dict[str, Any]]
    from_observation: Callable[[Observation], Any]
    info: Callable[[Observation], dict[str, Any]] | None = None
    nondeterministic: bool = False


# `module.Class` of an action model -> `module:factory() -> GymSpec`, for env families in layers above
# this one (the core never imports them); the first class in the action model's MRO that is listed wins.
_GYM_SPECS = {"openenv.harness.models.HarnessAction": "openenv.harness.gym:harness_gym_spec"}
# Env folders with this file are harness envs (real CLIs, sampled replies): registered nondeterministic.
_HARNESS_MARKER = "spec.yaml"


def gym_spec_for(action_type: type[Any], **options: Any) -> GymSpec | None:
    """The registered `GymSpec` of an action model's env family (built with `options`), or None."""
    for klass in getattr(action_type, "__mro__", ()):
        ref = _GYM_SPECS.get(f"{klass.__module__}.{klass.__qualname__}")
        if ref is not None:
            return import_object(ref)(**options)
    return None


def space_for_model(
    model: type[BaseModel], *, exclude: frozenset[str] = frozenset(), text_length: int = 256
) -> spaces.Dict:
    """A `Dict` space with one subspace per field of `model` (minus `exclude`); see `space_for_schema`."""
    return space_for_schema(model.model_json_schema(), exclude=exclude, text_length=text_length)


def space_for_schema(
    schema: dict[str, Any], *, exclude: frozenset[str] = frozenset(), text_length: int = 256
) -> spaces.Dict:
    """A `Dict` space from a model's JSON Schema, so servers known only by URL get spaces too.

    Raises:
        TypeError: a field's type has no obvious space; pass `action_space`/`observation_space` instead.
    """
    subspaces: dict[str, spaces.Space[Any]] = {}
    for name, prop in schema.get("properties", {}).items():
        if name in exclude:
            continue
        kind = prop.get("type")
        if kind not in _SPACES:
            raise TypeError(
                f"{schema.get('title', 'model')}.{name} has schema {prop!r}, which has no default gymnasium "
                "space; pass action_space=/observation_space= and to_action=/from_observation= to OpenEnvGym"
            )
        subspaces[name] = _SPACES[kind](text_length)
    return spaces.Dict(subspaces)


_SPACES: dict[str, Callable[[int], spaces.Space[Any]]] = {
    "string": lambda n: spaces.Text(max_length=n, min_length=0),
    "boolean": lambda n: spaces.Discrete(2),
    "integer": lambda n: spaces.Box(_INT.min, _INT.max, shape=(), dtype=np.int64),
    "number": lambda n: spaces.Box(-np.inf, np.inf, shape=(), dtype=np.float64),
}


def _served_schemas(client: SyncEnvClient[Any, Any, Any]) -> dict[str, Any]:
    """The models of a server this process has no classes for, from its `/schema`."""
    base = client.client.base_url
    reply = httpx.get(f"{base}/schema", headers=auth_headers(base, client.client.token), timeout=10.0)
    return reply.json()


class OpenEnvGym(gymnasium.Env[GymDict, GymDict]):
    """Gymnasium view of an openenv session: `terminated` is the observation's `done`, never truncated."""

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(
        self,
        client: SyncEnvClient[Any, Any, Any],
        *,
        action_space: spaces.Space[Any] | None = None,
        observation_space: spaces.Space[Any] | None = None,
        to_action: Callable[[Any], dict[str, Any]] | None = None,
        from_observation: Callable[[Observation], Any] | None = None,
        text_length: int = 256,
        spec_options: dict[str, Any] | None = None,
    ) -> None:
        """
        Args:
            client: A sync client for one session (e.g. `AutoEnv.from_env("echo").sync()`).
            action_space: Defaults to `space_for_model(client.action_type)`.
            observation_space: Defaults to the observation model's fields minus done/reward/metadata.
            to_action: Gym action -> action fields; defaults to a per-field conversion.
            from_observation: Observation -> gym observation; defaults to a per-field conversion.
            text_length: Max length of default `Text` spaces.
            spec_options: Passed to the env family's `GymSpec` factory, where it has one
                (`openenv.harness.gym.harness_gym_spec` for harness envs).
        """
        self.client = client
        self._info: Callable[[Observation], dict[str, Any]] = lambda obs: {}
        spec = (
            None
            if (action_space or observation_space)
            else gym_spec_for(client.action_type, **(spec_options or {}))
        )
        if spec is not None:
            action_space, observation_space = spec.action_space, spec.observation_space
            to_action, from_observation = (
                to_action or spec.to_action,
                from_observation or spec.from_observation,
            )
            self._info = spec.info or self._info
        typed = client.observation_type is not AnyObservation
        served = {} if typed or (action_space and observation_space) else _served_schemas(client)
        action_schema = client.action_type.model_json_schema() if typed else served.get("action", {})
        obs_schema = client.observation_type.model_json_schema() if typed else served.get("observation", {})
        self.action_space = action_space or space_for_schema(action_schema, text_length=text_length)
        self.observation_space = observation_space or space_for_schema(
            obs_schema, exclude=_OBS_BOOKKEEPING, text_length=text_length
        )
        self._to_action = to_action or self._default_to_action
        self._from_observation = from_observation or self._default_from_observation

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        obs = self.client.reset(seed=seed, **(options or {}))
        return self._from_observation(obs), {"metadata": obs.metadata, **self._info(obs)}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        obs = self.client.step(self._to_action(action))
        reward = float(obs.reward) if obs.reward is not None else 0.0
        return (
            self._from_observation(obs),
            reward,
            obs.done,
            False,
            {"metadata": obs.metadata, **self._info(obs)},
        )

    def close(self) -> None:
        self.client.close()

    def _default_to_action(self, action: GymDict) -> dict[str, Any]:
        return {k: _to_python(v) for k, v in action.items()}

    def _default_from_observation(self, obs: Observation) -> GymDict:
        assert isinstance(self.observation_space, spaces.Dict)
        out: GymDict = {}
        for name, space in self.observation_space.spaces.items():
            value = getattr(obs, name)
            out[name] = np.asarray(value, dtype=space.dtype) if isinstance(space, spaces.Box) else value
            if isinstance(space, spaces.Discrete):
                out[name] = np.int64(value)
        return out


def _to_python(value: Any) -> Any:
    """numpy scalars and 0-d arrays become plain Python values for the JSON wire."""
    if isinstance(value, np.ndarray | np.generic):
        return value.item()
    return value


def make_env(env: str, **kwargs: Any) -> OpenEnvGym:
    """Gymnasium entry point: resolve `env` with `AutoEnv`, wrap a sync client for it."""
    return OpenEnvGym(AutoEnv.from_env(env).sync(), **kwargs)


def gym_id(env_name: str) -> str:
    """`echo` -> `openenv/Echo-v0`, `my_env` -> `openenv/MyEnv-v0`."""
    camel = "".join(part.capitalize() for part in env_name.replace("-", "_").split("_"))
    return f"openenv/{camel}-v0"


def register_envs() -> list[str]:
    """Register the generic id and one id per discoverable env; return the ids newly registered."""
    wanted: dict[str, dict[str, str]] = {GENERIC_ID: {}}
    wanted |= {gym_id(s.name): {"env": s.name} for s in discover_envs()}
    added = []
    for env_id, kwargs in wanted.items():
        if env_id not in gymnasium.registry:
            harness = bool(kwargs) and find_env_dir(kwargs["env"], _HARNESS_MARKER) is not None
            gymnasium.register(
                env_id,
                entry_point="openenv.gym:make_env",
                kwargs=kwargs,
                disable_env_checker=True,
                nondeterministic=harness,
            )
            added.append(env_id)
    return added


register_envs()
