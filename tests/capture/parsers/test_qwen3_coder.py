"""The Qwen3-Coder XML parser, on completions rendered by the real Qwen3.5/3.6 chat templates."""

from __future__ import annotations

import json

import pytest

from openenv.capture.parsers import get_parser
from openenv.capture.parsers.qwen3_coder import Qwen3CoderParser

PARSER = Qwen3CoderParser()


@pytest.mark.parametrize("template", ["qwen3_5_think", "qwen3_6", "qwen3_8"])
def test_call_rendered_by_the_real_template_parses_back(render_completion, template):
    text = render_completion(template, [{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}])
    parsed = PARSER.parse(text)
    assert [(c.name, json.loads(c.arguments)) for c in parsed.tool_calls] == [
        ("get_weather", {"city": "Paris", "days": 3})
    ]
    assert parsed.content == ""


def test_two_calls_with_text_and_reasoning():
    text = (
        "<think>\nNeed both cities.\n</think>\n\nChecking.\n"
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>\n"
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nRome\n</parameter>\n</function>\n</tool_call>"
    )
    parsed = PARSER.parse(text)
    assert parsed.reasoning == "Need both cities."
    assert parsed.content == "Checking."
    assert [json.loads(c.arguments)["city"] for c in parsed.tool_calls] == ["Paris", "Rome"]


def test_multiline_string_values_keep_inner_newlines_and_json_values_are_decoded():
    text = (
        "<tool_call>\n<function=write_file>\n<parameter=path>\na.py\n</parameter>\n"
        '<parameter=content>\nimport os\n\nprint(1)\n</parameter>\n<parameter=opts>\n{"mode": 420}\n'
        "</parameter>\n<parameter=force>\ntrue\n</parameter>\n</function>\n</tool_call>"
    )
    (call,) = PARSER.parse(text).tool_calls
    assert json.loads(call.arguments) == {
        "path": "a.py",
        "content": "import os\n\nprint(1)",
        "opts": {"mode": 420},
        "force": True,
    }


def test_call_cut_off_by_end_of_turn_still_counts():
    text = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>"
    assert [c.name for c in PARSER.parse(text).tool_calls] == ["get_weather"]


def test_markup_without_a_function_stays_content():
    parsed = PARSER.parse("Use <tool_call> tags like this.")
    assert parsed.tool_calls == ()
    assert parsed.content == "Use <tool_call> tags like this."


def test_is_registered_by_name():
    assert isinstance(get_parser("qwen3_coder"), Qwen3CoderParser)
