"""The echo env's episode logic, without a server."""

from __future__ import annotations

import pytest

from echo_env import EchoAction, EchoEnvironment
from openenv.errors import BadRequest


def test_each_step_echoes_and_rewards_a_tenth_per_character() -> None:
    env = EchoEnvironment()
    assert env.reset(episode_id="e").echoed_message == ""
    obs = env.step(EchoAction(message="hello"))
    assert (obs.echoed_message, obs.message_length, obs.reward, obs.done) == (
        "hello",
        5,
        pytest.approx(0.5),
        False,
    )
    assert (env.state.episode_id, env.state.step_count) == ("e", 1)


def test_max_steps_ends_the_episode() -> None:
    env = EchoEnvironment()
    env.reset(max_steps=2)
    assert [env.step(EchoAction(message="x")).done for _ in range(2)] == [False, True]


def test_reset_starts_a_fresh_episode_with_a_new_id() -> None:
    env = EchoEnvironment()
    env.reset()
    first = env.state.episode_id
    env.step(EchoAction(message="x"))
    env.reset()
    assert env.state.step_count == 0 and env.state.episode_id != first


def test_state_is_a_copy_callers_cannot_mutate() -> None:
    env = EchoEnvironment()
    env.reset()
    env.state.step_count = 99
    assert env.state.step_count == 0


def test_unknown_reset_options_are_a_bad_request() -> None:
    with pytest.raises(BadRequest, match="only the reset option max_steps"):
        EchoEnvironment().reset(level=3)
