"""Reply decoding without a server: both observation shapes, both error shapes, and what never escapes."""

from __future__ import annotations

import pytest

from openenv.client.errors import error_from_data
from openenv.client.replies import decode_model, observation_fields, parse_frame
from openenv.core.types import Observation
from openenv.errors import (
    BadRequest,
    CapacityError,
    EnvError,
    InvalidAction,
    MalformedMessage,
    OpenEnvError,
    UnexpectedReply,
    UnknownMessageType,
)


class Echoed(Observation):
    echoed_message: str = ""


class Wrapped(Observation):
    """An env of ours whose own field is called `observation`: its flat replies must stay flat."""

    observation: dict[str, int] = {}


NESTED = {
    "observation": {"metadata": {"step": 1}, "echoed_message": "hi"},
    "reward": 0.2,
    "done": True,
    "metadata": {"step": 1},
}


def test_a_nested_observation_is_opened_with_reward_and_done_put_back() -> None:
    fields = observation_fields(NESTED, Echoed.model_fields)
    assert fields == {"metadata": {"step": 1}, "echoed_message": "hi", "reward": 0.2, "done": True}
    assert decode_model(Echoed, fields, what="step observation") == Echoed(
        echoed_message="hi", reward=0.2, done=True, metadata={"step": 1}
    )


def test_top_level_metadata_fills_in_when_the_nested_observation_has_none() -> None:
    fields = observation_fields(
        {"observation": {"echoed_message": "x"}, "reward": None, "done": False, "metadata": {"k": "v"}},
        Echoed.model_fields,
    )
    assert fields["metadata"] == {"k": "v"}


def test_keys_a_server_adds_beside_the_envelope_are_left_out() -> None:
    fields = observation_fields({**NESTED, "session_id": "s1", "tokens": [1, 2]}, Echoed.model_fields)
    assert decode_model(Echoed, fields, what="step observation").echoed_message == "hi"


def test_a_flat_observation_is_read_as_it_is() -> None:
    flat = {"echoed_message": "hi", "reward": 1.0, "done": False, "metadata": {}}
    assert observation_fields(flat, Echoed.model_fields) is flat


def test_a_model_with_its_own_observation_field_keeps_the_flat_reading() -> None:
    flat = {"observation": {"a": 1}, "reward": 0.0, "done": False}
    assert observation_fields(flat, Wrapped.model_fields) is flat
    assert decode_model(Wrapped, flat, what="reset observation").observation == {"a": 1}


def test_a_reply_that_does_not_fit_the_model_is_unexpected_reply_naming_the_field() -> None:
    with pytest.raises(
        UnexpectedReply, match="reset observation field 'echoed_message': Input should be a valid"
    ):
        decode_model(Echoed, {"echoed_message": 3}, what="reset observation")


@pytest.mark.parametrize("raw", ["not json", '{"type": 3, "data": {}}', '{"data": {}}', b"\xff\xfe"])
def test_a_frame_that_is_not_a_reply_is_unexpected_reply(raw: str | bytes) -> None:
    with pytest.raises(UnexpectedReply, match="the server answered step with something that is not a reply"):
        parse_frame(raw, during="step")


def test_a_frame_of_another_type_than_asked_is_unexpected_reply() -> None:
    from openenv.client.env_client import _expect

    with pytest.raises(UnexpectedReply, match="answered state with a 'mcp' frame, not 'state'"):
        _expect(parse_frame('{"type": "mcp", "data": {}}', during="state"), "state", "state")


def test_our_error_body_keeps_its_class_and_details() -> None:
    err = error_from_data(
        {"code": "capacity", "message": "full", "details": {"active": 2, "maximum": 2}}, during="reset"
    )
    assert isinstance(err, CapacityError) and err.details == {"active": 2, "maximum": 2}


@pytest.mark.parametrize(
    ("code", "during", "cls"),
    [
        ("INVALID_JSON", "step", MalformedMessage),
        ("UNKNOWN_TYPE", "state", UnknownMessageType),
        ("VALIDATION_ERROR", "step", InvalidAction),
        ("VALIDATION_ERROR", "reset", BadRequest),
        ("EXECUTION_ERROR", "step", EnvError),
        ("CAPACITY_REACHED", "reset", CapacityError),
        ("FACTORY_ERROR", "reset", EnvError),
        ("SESSION_ERROR", "reset", EnvError),
    ],
)
def test_the_reference_error_codes_map_onto_our_classes(
    code: str, during: str, cls: type[OpenEnvError]
) -> None:
    err = error_from_data({"code": code, "message": "m"}, during=during)
    assert type(err) is cls and err.details["server_code"] == code


def test_a_reference_validation_error_lists_each_field_in_our_message() -> None:
    err = error_from_data(
        {
            "message": "Invalid message",
            "code": "VALIDATION_ERROR",
            "errors": [
                {"type": "missing", "loc": ["message"], "msg": "Field required", "input": {}},
                {
                    "type": "extra_forbidden",
                    "loc": ["mesage"],
                    "msg": "Extra inputs are not permitted",
                    "input": "x",
                },
            ],
        },
        during="step",
    )
    assert err.message == (
        "Invalid message: action field 'message': Field required; "
        "action field 'mesage': Extra inputs are not permitted"
    )


def test_an_unknown_code_keeps_it_and_an_unreadable_error_is_unexpected_reply() -> None:
    err = error_from_data({"code": "NEW_CODE", "message": "later"}, during="step")
    assert type(err) is OpenEnvError and err.code == "NEW_CODE"
    err = error_from_data(
        {"code": "NEW_CODE", "message": "later", "hint": "x"}, during="step"
    )  # reference-like
    assert type(err) is OpenEnvError and err.code == "new_code" and err.details["hint"] == "x"
    assert isinstance(error_from_data({"oops": 1}, during="step"), UnexpectedReply)
    assert isinstance(error_from_data(["not", "a", "dict"], during="step"), UnexpectedReply)
