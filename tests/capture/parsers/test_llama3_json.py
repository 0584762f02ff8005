"""The Llama 3 JSON parser, on completions rendered by the real Llama 3.1 / 3.2 chat templates."""

from __future__ import annotations

import json

import pytest

from openenv.capture.parsers import get_parser
from openenv.capture.parsers.llama3_json import Llama3JsonParser

PARSER = Llama3JsonParser()


@pytest.mark.parametrize("template", ["llama3_1", "llama3_2"])
def test_call_rendered_by_the_real_template_parses_back(render_completion, template):
    call = {"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}
    text = render_completion(template, [call], end="<|eot_id|>")
    (parsed,) = PARSER.parse(text).tool_calls
    assert (parsed.name, json.loads(parsed.arguments)) == ("get_weather", {"city": "Paris", "days": 3})


def test_python_tag_and_semicolon_separated_calls():
    text = '<|python_tag|>{"name": "a", "parameters": {"x": 1}}; {"name": "b", "arguments": {"y": "z"}}'
    parsed = PARSER.parse(text)
    assert [(c.name, json.loads(c.arguments)) for c in parsed.tool_calls] == [
        ("a", {"x": 1}),
        ("b", {"y": "z"}),
    ]
    assert parsed.content == ""


def test_prose_is_content_even_when_it_contains_json():
    text = 'The call looks like {"name": "a", "parameters": {}}.'
    parsed = PARSER.parse(text)
    assert parsed.tool_calls == ()
    assert parsed.content == text


def test_json_that_is_not_a_call_is_content():
    assert PARSER.parse('{"answer": 42}').tool_calls == ()
    assert PARSER.parse('{"answer": 42}').content == '{"answer": 42}'


def test_is_registered_by_name():
    assert isinstance(get_parser("llama3_json"), Llama3JsonParser)
