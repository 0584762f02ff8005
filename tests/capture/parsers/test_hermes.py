"""The hermes parser on strings in the exact format Qwen2.5/Hermes models write."""

from __future__ import annotations

import json

import pytest

from openenv.capture.parsers import PARSERS, get_parser
from openenv.capture.parsers.base import ParsedText, split_reasoning
from openenv.errors import BadRequest

hermes = PARSERS["hermes"]


def test_plain_text_is_content() -> None:
    assert hermes.parse("Hello there.") == ParsedText(content="Hello there.")


def test_one_call_with_leading_text() -> None:
    out = hermes.parse(
        'Let me look.\n<tool_call>\n{"name": "bash", "arguments": {"command": "ls"}}\n</tool_call>'
    )
    assert out.content == "Let me look."
    assert [(c.name, json.loads(c.arguments)) for c in out.tool_calls] == [("bash", {"command": "ls"})]


def test_parallel_calls_keep_their_order() -> None:
    text = (
        '<tool_call>\n{"name": "a", "arguments": {}}\n</tool_call>\n'
        '<tool_call>\n{"name": "b", "arguments": {"x": [1, 2]}}\n</tool_call>'
    )
    out = hermes.parse(text)
    assert [c.name for c in out.tool_calls] == ["a", "b"] and out.content == ""
    assert json.loads(out.tool_calls[1].arguments) == {"x": [1, 2]}


def test_reasoning_is_split_off() -> None:
    out = hermes.parse(
        '<think>\nI should list files.\n</think>\n\n<tool_call>\n{"name": "ls", "arguments": {}}\n</tool_call>'
    )
    assert out.reasoning == "I should list files." and out.tool_calls[0].name == "ls"


def test_reasoning_opened_by_the_generation_prompt() -> None:
    assert split_reasoning("thinking\n</think>\n\nanswer") == ("thinking", "answer")


def test_unterminated_reasoning_cut_by_max_tokens() -> None:
    assert split_reasoning("<think>\nhalf a thou") == ("half a thou", "")


def test_a_call_cut_by_the_end_of_turn_still_counts() -> None:
    out = hermes.parse('<tool_call>\n{"name": "bash", "arguments": {"command": "pwd"}}')
    assert out.tool_calls[0].name == "bash"


def test_malformed_json_stays_content() -> None:
    text = "<tool_call>\n{not json}\n</tool_call>"
    out = hermes.parse(text)
    assert out.tool_calls == () and out.content == text


def test_string_arguments_are_kept_as_json_text() -> None:
    out = hermes.parse('<tool_call>{"name": "f", "arguments": "{\\"a\\": 1}"}</tool_call>')
    assert json.loads(out.tool_calls[0].arguments) == {"a": 1}


def test_unknown_parser_names_the_known_ones() -> None:
    with pytest.raises(BadRequest, match="hermes"):
        get_parser("nope")
