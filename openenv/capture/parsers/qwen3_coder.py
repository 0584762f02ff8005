"""Qwen3-Coder XML format: `<tool_call>\n<function=NAME>\n<parameter=KEY>\nVALUE\n</parameter>...`.

Values are raw text. Without the tool schema a value is read as JSON when it is a number, boolean,
null, object or array, and kept as a string otherwise (vLLM's `qwen3_coder` parser consults the
schema instead; a string parameter holding `"42"` is the one case where the two differ).
"""

from __future__ import annotations

import json
import re
from typing import Any

from openenv.capture.parsers.base import ParsedCall, TagParser

__all__ = ["Qwen3CoderParser"]

# A final unclosed block counts too: a call cut by the end-of-turn token is still a call.
_CALL = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)
_FUNCTION = re.compile(r"<function=([^>\n]+)>(.*?)(?:</function>|$)", re.DOTALL)
_PARAMETER = re.compile(r"<parameter=([^>\n]+)>(.*?)(?:</parameter>|(?=<parameter=)|$)", re.DOTALL)


def _call(body: str) -> ParsedCall | None:
    function = _FUNCTION.search(body)
    if function is None:
        return None
    args = {key.strip(): _value(raw) for key, raw in _PARAMETER.findall(function.group(2))}
    return ParsedCall(name=function.group(1).strip(), arguments=json.dumps(args, ensure_ascii=False))


def _value(raw: str) -> Any:
    """The template writes one newline after `<parameter=...>` and one before `</parameter>`."""
    value = raw.removeprefix("\n").removesuffix("\n")
    try:
        decoded = json.loads(value)
    except ValueError:
        return value
    return value if isinstance(decoded, str) else decoded


class Qwen3CoderParser(TagParser):
    """Qwen3-Coder (and Qwen3.5) XML tool calls; reasoning inside `<think>`."""

    name = "qwen3_coder"
    block, close = _CALL, "</tool_call>"
    decode = staticmethod(_call)
