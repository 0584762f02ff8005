"""The LFM2 pythonic parser, on completions rendered by the real LFM2.5 chat template."""

from __future__ import annotations

import json

from openenv.capture.parsers import get_parser
from openenv.capture.parsers.lfm2 import Lfm2Parser

PARSER = Lfm2Parser()


def test_call_rendered_by_the_real_template_parses_back(render_completion):
    text = render_completion("lfm2_2_5", [{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}])
    (call,) = PARSER.parse(text).tool_calls
    assert (call.name, json.loads(call.arguments)) == ("get_weather", {"city": "Paris", "days": 3})


def test_several_calls_in_one_list_with_literal_values_and_surrounding_text():
    text = (
        'Let me check.<|tool_call_start|>[get_weather(city="Paris", units=None), '
        'search(query="a \\"quoted\\" word", tags=["x", "y"], exact=True)]<|tool_call_end|>Done soon.'
    )
    parsed = PARSER.parse(text)
    assert [(c.name, json.loads(c.arguments)) for c in parsed.tool_calls] == [
        ("get_weather", {"city": "Paris", "units": None}),
        ("search", {"query": 'a "quoted" word', "tags": ["x", "y"], "exact": True}),
    ]
    assert parsed.content == "Let me check.Done soon."


def test_dotted_names_are_kept_whole():
    (call,) = PARSER.parse("<|tool_call_start|>[files.read(path='a.txt')]<|tool_call_end|>").tool_calls
    assert call.name == "files.read"


def test_code_that_is_not_a_literal_call_list_stays_content_and_is_never_run():
    text = "<|tool_call_start|>[__import__('os').system('true')]<|tool_call_end|>"
    parsed = PARSER.parse(text)
    assert parsed.tool_calls == ()
    assert parsed.content == text


def test_positional_arguments_are_not_a_call():
    assert PARSER.parse("<|tool_call_start|>[f(1)]<|tool_call_end|>").tool_calls == ()


def test_is_registered_by_name():
    assert isinstance(get_parser("lfm2"), Lfm2Parser)
