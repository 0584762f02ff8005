"""The wire protocol: WebSocket frames dispatch through one discriminated union."""

from __future__ import annotations

import json

import pytest
from echo_env import EchoObservation
from pydantic import ValidationError

from openenv.core.wire import (
    CloseMessage,
    ResetMessage,
    StateMessage,
    StepMessage,
    client_message_adapter,
    encode_frame,
)


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
    assert frame["data"]["echoed_message"] == "hi"
    assert json.loads(encode_frame("closed")) == {"type": "closed", "data": {}}
