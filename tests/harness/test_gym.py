"""Harness envs through Gymnasium alone: `gymnasium.make("openenv/<Harness>-v0")`, spaces a policy can
act on, gymnasium's own env checker, and a whole oracle episode of pi played through `reset`/`step`."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.utils.env_checker import check_env

import openenv.gym  # noqa: F401  (registers the ids)
from openenv.capture.canonical import CanonicalRequest
from openenv.gym import UnicodeText, gym_id
from openenv.harness.catalog import get_spec, harness_names
from openenv.harness.gym import KINDS, to_action
from openenv.harness.install import install_status
from openenv.harness.oracle import OraclePolicy
from openenv.harness.tasks import builtin_task

TASK = "fix-temperature-conversion"


def _require(name: str) -> None:
    status = install_status(get_spec(name))
    if not status.ready:
        pytest.skip(f"{name} {status.pinned} is not installed; run scripts/install_harnesses.sh {name}")


def test_every_harness_id_makes_an_env_with_actionable_spaces() -> None:
    for name in harness_names():
        env = gymnasium.make(gym_id(name))
        try:
            assert env.spec is not None and env.spec.nondeterministic is True
            action = env.action_space
            assert isinstance(action, spaces.Dict) and action["kind"] == spaces.Discrete(3)
            assert isinstance(action["text"], UnicodeText)
            assert set(env.observation_space.spaces) == {
                "prompt_ids",
                "prompt",
                "last_reply",
                "turns",
                "tool_calls",
            }
        finally:
            env.close()


def test_actions_map_to_the_three_kinds_and_any_unicode_reply_is_in_the_space() -> None:
    assert KINDS == ("sample", "complete", "run")
    assert to_action({"kind": np.int64(0), "text": "ignored"}) == {"kind": "sample"}
    assert to_action({"kind": 1, "text": "naïve → <tool_call>"}) == {
        "kind": "complete",
        "text": "naïve → <tool_call>",
    }
    assert to_action({"kind": 2, "text": ""}) == {"kind": "run"}
    text = UnicodeText(16)
    assert text.contains("naïve → ok") and not text.contains("x" * 17) and not text.contains(b"bytes")
    assert text.contains(text.sample())


@pytest.mark.slow
def test_pi_passes_gymnasiums_env_checker() -> None:
    _require("pi")
    env = gymnasium.make("openenv/Pi-v0")
    try:
        check_env(env.unwrapped, skip_render_check=True)
    finally:
        env.close()


@pytest.mark.slow
def test_an_oracle_episode_of_pi_through_the_gymnasium_api_alone() -> None:
    _require("pi")
    oracle = OraclePolicy(get_spec("pi"), builtin_task(TASK))
    env = gymnasium.make("openenv/Pi-v0")
    try:
        obs, info = env.reset(seed=0, options={"task": TASK, "stage_solution": True})
        assert obs in env.observation_space and len(obs["prompt_ids"]) > 100
        assert obs["prompt"].endswith("<|im_start|>assistant\n") and obs["turns"] == 0
        steps, terminated, reward = 0, False, 0.0
        while not terminated:
            request = CanonicalRequest.model_validate(info["request"])
            action = {"kind": 1, "text": oracle.reply(request, aux=info["aux"])}
            assert action in env.action_space
            obs, reward, terminated, truncated, info = env.step(action)
            assert obs in env.observation_space and truncated is False
            steps += 1
    finally:
        env.close()
    assert reward == 1.0 and info["reward_status"] == "scored" and steps >= 2
    assert len(obs["prompt_ids"]) == 0 and obs["turns"] >= 2 and obs["tool_calls"] >= 1
    (row,) = info["sequences"]
    assert len(row["completion_ids"]) == len(row["logprobs"]) == len(row["env_mask"])
    assert info["stats"]["merge_ratio"] == 1.0


def test_spec_options_size_the_spaces_through_gymnasium_make() -> None:
    env = gymnasium.make("openenv/Pi-v0", spec_options={"vocab_size": 4096, "reply_length": 64})
    try:
        assert env.observation_space["prompt_ids"].feature_space == spaces.Discrete(4096)
        assert env.action_space["text"] == UnicodeText(64)
        assert not env.action_space["text"].contains("x" * 65)
    finally:
        env.close()
