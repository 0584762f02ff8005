"""Hermes / Qwen2.5 format: `<tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>`, `<think>`."""

from __future__ import annotations

import json
import re

from openenv.capture.parsers.base import ParsedCall, TagParser, json_arguments

__all__ = ["HermesParser"]

# A final unclosed block counts too: a call cut by the end-of-turn token is still a call.
_CALL = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)


def _call(body: str) -> ParsedCall | None:
    try:
        obj = json.loads(body)
    except ValueError:
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return None
    args = obj.get("arguments", obj.get("parameters"))
    return ParsedCall(name=obj["name"], arguments=json_arguments(args if args is not None else {}))


class HermesParser(TagParser):
    """Tool calls as JSON objects inside `<tool_call>` tags; reasoning inside `<think>`."""

    name = "hermes"
    block, close = _CALL, "</tool_call>"
    decode = staticmethod(_call)
