"""The canonical model: override semantics, helpers, strictness."""

from __future__ import annotations

import pydantic
import pytest

from openenv.capture.canonical import CanonicalRequest, Message, SamplingParams, TextPart, ToolCallPart, Usage


def test_proxy_sampling_wins_only_where_it_is_set() -> None:
    harness = SamplingParams(temperature=0.2, max_tokens=500, top_p=0.9)
    proxy = SamplingParams(temperature=1.0, max_tokens=64)
    assert harness.merged(proxy) == SamplingParams(temperature=1.0, max_tokens=64, top_p=0.9)
    assert harness.merged(None) is harness


def test_tool_call_arguments_parse_leniently() -> None:
    assert ToolCallPart(id="1", name="f", arguments='{"a": 1}').parsed_arguments() == {"a": 1}
    assert ToolCallPart(id="1", name="f", arguments="not json").parsed_arguments() == {}
    assert ToolCallPart(id="1", name="f", arguments="[1]").parsed_arguments() == {}


def test_message_helpers_and_system_text() -> None:
    req = CanonicalRequest(
        messages=(
            Message(role="system", parts=(TextPart(text="a"),)),
            Message(role="system", parts=(TextPart(text="b"),)),
            Message(role="user", parts=(TextPart(text="hi "), TextPart(text="there"))),
        )
    )
    assert req.system_text() == "a\n\nb"
    assert req.messages[2].text() == "hi there"


def test_models_are_frozen_and_strict() -> None:
    with pytest.raises(pydantic.ValidationError):
        Message(role="robot", parts=())  # type: ignore[arg-type]
    with pytest.raises(pydantic.ValidationError):
        SamplingParams(temprature=1.0)  # type: ignore[call-arg]
    with pytest.raises(pydantic.ValidationError):
        Usage(prompt_tokens=1, completion_tokens=2).prompt_tokens = 5  # type: ignore[misc]
    assert Usage(prompt_tokens=1, completion_tokens=2).total_tokens == 3
