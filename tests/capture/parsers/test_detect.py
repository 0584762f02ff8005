"""Choosing a parser from a chat template, checked on the real templates TRL ships."""

from __future__ import annotations

import pytest

from openenv.capture.parsers import PARSERS, detect_parser


@pytest.mark.parametrize(
    ("template", "parser"),
    [
        ("qwen2_5", "hermes"),
        ("qwen3", "hermes"),
        ("qwen3_instruct_2507", "hermes"),
        ("qwen3_5_think", "qwen3_coder"),
        ("qwen3_6", "qwen3_coder"),
        ("lfm2", "lfm2"),
        ("lfm2_2_5", "lfm2"),
        ("llama3_1", "llama3_json"),
        ("llama3_2", "llama3_json"),
    ],
)
def test_real_template_selects_its_registered_parser(chat_template, template, parser):
    assert detect_parser(chat_template(template)) == parser
    assert parser in PARSERS


def test_template_without_tool_markup_selects_nothing(chat_template):
    assert detect_parser(chat_template("llama3")) is None
    assert detect_parser(None) is None


def test_proxy_with_parser_auto_picks_the_tiny_models_format(renderer):
    """The tiny model's Qwen2.5-style template writes `<tool_call>` JSON: hermes."""
    from openenv.capture.backends import VLLMBackend
    from openenv.capture.registry import CaptureSessionRegistry

    backend = VLLMBackend("http://127.0.0.1:9")  # never called: only the parser choice is checked
    registry = CaptureSessionRegistry(renderer=renderer, backend=backend, parser="auto")
    assert registry.parser is PARSERS["hermes"]
