"""The Gymnasium adapter: registered ids, spaces from the env's models, and gymnasium's own checker."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.utils.env_checker import check_env
from pydantic import BaseModel

import openenv.gym
from echo_env import EchoAction, EchoEnvironment, EchoObservation
from openenv.gym import GENERIC_ID, OpenEnvGym, gym_id, space_for_model
from openenv.server import LocalServer, create_app


def test_make_echo_passes_gymnasiums_env_checker() -> None:
    env = gymnasium.make("openenv/Echo-v0")
    try:
        check_env(env.unwrapped)
    finally:
        env.close()


def test_an_episode_through_gymnasium_make() -> None:
    env = gymnasium.make("openenv/Echo-v0")
    try:
        obs, info = env.reset(seed=0, options={"max_steps": 2})
        assert obs["echoed_message"] == "" and info == {"metadata": {}}
        obs, reward, terminated, truncated, _ = env.step({"message": "abc"})
        assert obs == {"echoed_message": "abc", "message_length": np.int64(3)}
        assert (reward, terminated, truncated) == (pytest.approx(0.3), False, False)
        assert env.step({"message": "d"})[2] is True
    finally:
        env.close()


def test_the_generic_id_takes_any_env_source() -> None:
    with LocalServer(create_app(EchoEnvironment)) as server:
        env = gymnasium.make(GENERIC_ID, env=server.base_url)
        try:
            env.reset(seed=1)
            obs, *_ = env.step({"message": "generic"})
        finally:
            env.close()
    assert obs["echoed_message"] == "generic"


def test_module_prefixed_ids_import_the_adapter_themselves() -> None:
    env = gymnasium.make("openenv.gym:openenv/Echo-v0")
    env.close()


def test_spaces_follow_the_model_fields() -> None:
    assert space_for_model(EchoAction) == spaces.Dict({"message": spaces.Text(256, min_length=0)})
    obs_space = space_for_model(EchoObservation, exclude=frozenset({"done", "reward", "metadata"}))
    assert set(obs_space.spaces) == {"echoed_message", "message_length"}
    assert obs_space["message_length"].dtype == np.int64


def test_fields_without_an_obvious_space_ask_for_explicit_spaces() -> None:
    class Nested(BaseModel):
        items: list[str]

    with pytest.raises(TypeError, match="Nested.items has schema .* pass action_space="):
        space_for_model(Nested)


def test_env_names_become_camel_case_ids() -> None:
    assert gym_id("echo") == "openenv/Echo-v0"
    assert gym_id("mini_swe-agent") == "openenv/MiniSweAgent-v0"
    assert {"openenv/Echo-v0", GENERIC_ID} <= set(gymnasium.registry)
    assert openenv.gym.register_envs() == []  # idempotent


def test_explicit_spaces_and_converters_replace_the_defaults() -> None:
    with LocalServer(create_app(EchoEnvironment)) as server:
        from echo_env import EchoClient

        env = OpenEnvGym(
            EchoClient.from_url(server.base_url).sync(),
            action_space=spaces.Discrete(3),
            observation_space=spaces.Box(0, 100, shape=(), dtype=np.int64),
            to_action=lambda a: {"message": "x" * int(a)},
            from_observation=lambda o: np.int64(o.message_length),
        )
        try:
            env.reset()
            obs, reward, *_ = env.step(2)
        finally:
            env.close()
    assert obs == 2 and reward == pytest.approx(0.2)
