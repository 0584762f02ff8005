"""Real chat templates (the copies TRL ships for model identification) to render tool calls with."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather in a city.",
        "parameters": {
            "type": "object",
            "required": ["city"],
            "properties": {
                "city": {"type": "string"},
                "days": {"type": "integer"},
                "units": {"type": "string"},
            },
        },
    },
}


def _chat_template(name: str) -> str:
    trl = pytest.importorskip("trl")
    return (Path(trl.__file__).parent / "chat_templates" / f"{name}.jinja").read_text()


@pytest.fixture
def chat_template() -> Callable[[str], str]:
    """The text of TRL's `chat_templates/<name>.jinja` (skips the test when TRL is absent)."""
    return _chat_template


@pytest.fixture
def render_completion() -> Callable[..., str]:
    """What a model trained on template `name` writes for an assistant turn, up to its end-of-turn
    token: the rendered conversation minus the rendered prompt."""
    from transformers.utils.chat_template_utils import render_jinja_template

    def render(name: str, calls: list[dict[str, Any]], content: str = "", end: str = "<|im_end|>") -> str:
        template = _chat_template(name)
        user = [{"role": "user", "content": "What is the weather in Paris?"}]
        tool_calls = [{"type": "function", "function": c} for c in calls]
        turn = user + [{"role": "assistant", "content": content, "tool_calls": tool_calls}]
        (prompt,), _ = render_jinja_template(
            conversations=[user], tools=[WEATHER_TOOL], chat_template=template, add_generation_prompt=True
        )
        (full,), _ = render_jinja_template(conversations=[turn], tools=[WEATHER_TOOL], chat_template=template)
        assert full.startswith(prompt), "template is not prefix-preserving"
        return full[len(prompt) :].split(end)[0]

    return render
