"""A `gymnasium.Env` over any openenv client, and `gymnasium.register` ids for the discoverable envs.

Importing this module registers `openenv/<Name>-v0` for every env `openenv list` shows (so
`gymnasium.make("openenv/Echo-v0")` works; `gymnasium.make("openenv.gym:openenv/Echo-v0")` imports it
for you) and `openenv/Env-v0`, which takes `env=` (a name, folder, URL, `docker:IMAGE` or Space id).

Spaces come from the env's models (or, for a server known only by URL, the JSON Schemas it serves):
each string field is a `Text` space, integer/number a scalar `Box`, boolean a `Discrete(2)`. Envs with
other field types pass their own spaces and converters.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium
import httpx
import numpy as np
from gymnasium import spaces
from pydantic import BaseModel

from openenv.auto import AutoEnv, discover_envs
from openenv.client import AnyObservation, SyncEnvClient
from openenv.core.types import Observation

__all__ = [
    "GENERIC_ID",
    "OpenEnvGym",
    "gym_id",
    "make_env",
    "register_envs",
    "space_for_model",
    "space_for_schema",
]

GENERIC_ID = "openenv/Env-v0"
_OBS_BOOKKEEPING = frozenset({"done", "reward", "metadata"})
_INT = np.iinfo(np.int64)

GymDict = dict[str, Any]


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
    return httpx.get(f"{client.client.base_url}/schema", timeout=10.0).json()  # type: ignore[no-any-return]


class OpenEnvGym(gymnasium.Env[GymDict, GymDict]):
    """Gymnasium view of an openenv session: `terminated` is the observation's `done`, never truncated."""

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012 (gymnasium declares it this way)

    def __init__(
        self,
        client: SyncEnvClient[Any, Any, Any],
        *,
        action_space: spaces.Space[Any] | None = None,
        observation_space: spaces.Space[Any] | None = None,
        to_action: Callable[[Any], dict[str, Any]] | None = None,
        from_observation: Callable[[Observation], Any] | None = None,
        text_length: int = 256,
    ) -> None:
        """
        Args:
            client: A sync client for one session (e.g. `AutoEnv.from_env("echo").sync()`).
            action_space: Defaults to `space_for_model(client.action_type)`.
            observation_space: Defaults to the observation model's fields minus done/reward/metadata.
            to_action: Gym action -> action fields; defaults to a per-field conversion.
            from_observation: Observation -> gym observation; defaults to a per-field conversion.
            text_length: Max length of default `Text` spaces.
        """
        self.client = client
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
        return self._from_observation(obs), {"metadata": obs.metadata}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        obs = self.client.step(self._to_action(action))
        reward = float(obs.reward) if obs.reward is not None else 0.0
        return self._from_observation(obs), reward, obs.done, False, {"metadata": obs.metadata}

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
            gymnasium.register(
                env_id, entry_point="openenv.gym:make_env", kwargs=kwargs, disable_env_checker=True
            )
            added.append(env_id)
    return added


register_envs()
