"""Action/Observation/State: strict models whose errors name the offending field."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from echo_env import EchoAction
from openenv.core import Action, Observation, State


def test_unknown_action_field_is_an_error_naming_the_field() -> None:
    with pytest.raises(ValidationError) as info:
        EchoAction.model_validate({"message": "hi", "mesage": "typo"})
    assert info.value.errors()[0]["loc"] == ("mesage",)
    assert info.value.errors()[0]["type"] == "extra_forbidden"


def test_observation_carries_done_reward_and_metadata_by_default() -> None:
    obs = Observation()
    assert (obs.done, obs.reward, obs.metadata) == (False, None, {})


def test_state_starts_without_episode_and_rejects_negative_step_count() -> None:
    assert State().model_dump() == {"episode_id": None, "step_count": 0}
    with pytest.raises(ValidationError):
        State(step_count=-1)


def test_all_three_bases_forbid_extra_fields() -> None:
    for model in (Action, Observation, State):
        with pytest.raises(ValidationError):
            model.model_validate({"surprise": 1})
