"""Hermes / Qwen2.5 format: `<tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>`, `<think>`."""

from __future__ import annotations

import json
import re

from openenv.capture.parsers.base import ParsedCall, ParsedText, json_arguments, split_reasoning

__all__ = ["HermesParser"]

# A final unclosed block counts too: a call cut by the end-of-turn token is still a call.
_CALL = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)


class HermesParser:
    """Tool calls as JSON objects inside `<tool_call>` tags; reasoning inside `<think>`."""

    name = "hermes"

    def parse(self, text: str) -> ParsedText:
        reasoning, rest = split_reasoning(text)
        calls: list[ParsedCall] = []
        kept: list[str] = []
        cursor = 0
        for match in _CALL.finditer(rest):
            call = _call(match.group(1))
            if call is None:
                continue
            kept.append(rest[cursor:match.start()])
            cursor = match.end()
            calls.append(call)
        kept.append(rest[cursor:])
        return ParsedText(content="".join(kept).strip(), reasoning=reasoning, tool_calls=tuple(calls))


def _call(body: str) -> ParsedCall | None:
    try:
        obj = json.loads(body)
    except ValueError:
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return None
    args = obj.get("arguments", obj.get("parameters"))
    return ParsedCall(name=obj["name"], arguments=json_arguments(args if args is not None else {}))
