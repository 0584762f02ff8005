"""Llama 3.x JSON format: the reply is `{"name": ..., "parameters": {...}}` (optionally after
`<|python_tag|>`), with several calls separated by `;`.

A reply that does not start with a call is plain content, as in vLLM's `llama3_json` parser: Llama
writes calls instead of prose, never inside it.
"""

from __future__ import annotations

import json

from openenv.capture.parsers.base import CallAttempt, ParsedCall, ParsedText, json_arguments, split_reasoning

__all__ = ["Llama3JsonParser"]

PYTHON_TAG = "<|python_tag|>"
_DECODER = json.JSONDecoder()


class Llama3JsonParser:
    """Llama 3.1 / 3.2 / 3.3 JSON tool calls."""

    name = "llama3_json"

    def parse(self, text: str) -> ParsedText:
        reasoning, rest = split_reasoning(text)
        stripped = rest.strip()
        tagged = stripped.startswith(PYTHON_TAG)
        body = stripped.removeprefix(PYTHON_TAG).lstrip()
        base = len(text) - len(rest) + (len(rest) - len(rest.lstrip())) + (len(stripped) - len(body))
        calls: list[ParsedCall] = []
        attempts: list[CallAttempt] = []
        cursor = 0
        while cursor < len(body) and body[cursor] == "{":
            try:
                obj, end = _DECODER.raw_decode(body, cursor)
                call = _call(obj)
            except ValueError:
                call = None
            if call is None:  # a call that does not decode, where the model writes calls
                if tagged or calls or '"name"' in body[cursor : cursor + 64]:
                    attempts.append(CallAttempt("malformed", base + cursor, base + len(body)))
                break
            calls.append(call)
            attempts.append(CallAttempt("parsed", base + cursor, base + end, 1))
            cursor = _skip_separators(body, end)
        if not calls:
            return ParsedText(content=rest.strip(), reasoning=reasoning, attempts=tuple(attempts))
        return ParsedText(
            content=body[cursor:].strip(),
            reasoning=reasoning,
            tool_calls=tuple(calls),
            attempts=tuple(attempts),
        )


def _call(obj: object) -> ParsedCall | None:
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return None
    args = obj.get("parameters", obj.get("arguments"))
    return ParsedCall(name=obj["name"], arguments=json_arguments(args if args is not None else {}))


def _skip_separators(text: str, index: int) -> int:
    while index < len(text) and (text[index].isspace() or text[index] == ";"):
        index += 1
    return index
