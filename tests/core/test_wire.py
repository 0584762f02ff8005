"""The wire protocol: WebSocket frames dispatch through one discriminated union."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from echo_env import EchoObservation
from openenv.client.replies import observation_fields
from openenv.core.wire import (
    CloseMessage,
    McpMessage,
    ResetMessage,
    ResetRequest,
    StateMessage,
    StepMessage,
    client_message_adapter,
    encode_frame,
    observation_json,
)
from openenv.errors import BadRequest


@pytest.mark.parametrize(
    ("frame", "cls"),
    [
        ('{"type": "reset", "data": {"seed": 3}}', ResetMessage),
        ('{"type": "reset"}', ResetMessage),
        ('{"type": "step", "data": {"message": "hi"}}', StepMessage),
        ('{"type": "state"}', StateMessage),
        ('{"type": "close"}', CloseMessage),
    ],
)
def test_each_message_type_parses_to_its_model(frame: str, cls: type) -> None:
    assert isinstance(client_message_adapter.validate_json(frame), cls)


def test_unknown_type_is_a_union_tag_error() -> None:
    with pytest.raises(ValidationError) as info:
        client_message_adapter.validate_json('{"type": "dance"}')
    assert info.value.errors()[0]["type"] == "union_tag_invalid"


def test_encoded_frames_keep_subclass_fields() -> None:
    frame = json.loads(encode_frame("observation", EchoObservation(echoed_message="hi", message_length=2)))
    assert frame["type"] == "observation"
    assert frame["data"]["observation"]["echoed_message"] == "hi"
    assert json.loads(encode_frame("closed")) == {"type": "closed", "data": {}}


def test_observations_go_out_nested_with_reward_and_done_beside_them() -> None:
    """The reference's `serialize_observation` shape: fields under `observation` (reward and done taken
    out), reward and done beside it, metadata beside it too when set."""
    obs = EchoObservation(echoed_message="hi", message_length=2, reward=0.5, done=True, metadata={"k": 1})
    data = json.loads(observation_json(obs))
    assert data == {
        "observation": {"echoed_message": "hi", "message_length": 2, "metadata": {"k": 1}},
        "reward": 0.5,
        "done": True,
        "metadata": {"k": 1},
    }
    assert "metadata" not in json.loads(
        observation_json(EchoObservation(echoed_message="", message_length=0))
    )
    assert (
        json.loads(
            observation_json(EchoObservation(echoed_message="", message_length=0, reward=float("nan")))
        )["reward"]
        is None
    )


def test_the_nested_observation_round_trips_through_the_clients_reader() -> None:
    obs = EchoObservation(echoed_message="hi", message_length=2, reward=0.5, done=True, metadata={"k": 1})
    fields = observation_fields(json.loads(observation_json(obs)), EchoObservation.model_fields)
    assert EchoObservation.model_validate(fields) == obs


def test_reset_keywords_travel_flat_and_legacy_options_merge() -> None:
    req = ResetRequest.model_validate({"seed": 1, "task": "t", "options": {"difficulty": "hard"}})
    assert req.env_options() == {"task": "t", "difficulty": "hard"}
    with pytest.raises(BadRequest, match="'task' given both"):
        ResetRequest.model_validate({"task": "a", "options": {"task": "b"}}).env_options()


def test_mcp_frames_parse() -> None:
    msg = client_message_adapter.validate_json(
        '{"type": "mcp", "data": {"jsonrpc": "2.0", "method": "tools/list"}}'
    )
    assert isinstance(msg, McpMessage) and msg.data["method"] == "tools/list"
