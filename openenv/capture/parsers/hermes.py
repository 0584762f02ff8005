"""Hermes / Qwen2.5 format: `<tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>`, `<think>`."""

from __future__ import annotations

import json
import re

from openenv.capture.parsers.base import (
    CallAttempt,
    ParsedCall,
    ParsedText,
    extract_blocks,
    json_arguments,
    split_reasoning,
)

__all__ = ["HermesParser"]

# A final unclosed block counts too: a call cut by the end-of-turn token is still a call.
_CALL = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)


class HermesParser:
    """Tool calls as JSON objects inside `<tool_call>` tags; reasoning inside `<think>`."""

    name = "hermes"

    def parse(self, text: str) -> ParsedText:
        reasoning, rest = split_reasoning(text)
        attempts: list[CallAttempt] = []
        content, calls = extract_blocks(rest, _CALL, _call, close="</tool_call>", attempts=attempts,
                                        offset=len(text) - len(rest))
        return ParsedText(content=content, reasoning=reasoning, tool_calls=calls, attempts=tuple(attempts))


def _call(body: str) -> ParsedCall | None:
    try:
        obj = json.loads(body)
    except ValueError:
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return None
    args = obj.get("arguments", obj.get("parameters"))
    return ParsedCall(name=obj["name"], arguments=json_arguments(args if args is not None else {}))
