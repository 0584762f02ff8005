"""The parser seam: split a completion's text into reasoning, visible content and tool calls.

Each model family writes tool calls its own way; a parser knows one format. Parsers are pure
functions of the decoded completion text (special tokens kept), so they are easy to test on real
strings and cheap to run per turn.

Why not vLLM's parsers: importing `vllm.tool_parsers` costs ~25 s of CPU here (it pulls torch and
vLLM's engine config), its `extract_tool_calls` needs a `ChatCompletionRequest`, and the proxy must
run without the `vllm` package (local backend, remote vLLM). The formats are small and regular.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "CompletionParser",
    "ParsedCall",
    "ParsedText",
    "extract_blocks",
    "json_arguments",
    "split_reasoning",
]


@dataclass(frozen=True, slots=True)
class ParsedCall:
    """One tool call found in the text; `arguments` is JSON object text."""

    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class ParsedText:
    """A completion split into its three channels."""

    content: str
    reasoning: str = ""
    tool_calls: tuple[ParsedCall, ...] = ()


@runtime_checkable
class CompletionParser(Protocol):
    """One model family's output format. Set `name` in ALL implementations."""

    name: str

    def parse(self, text: str) -> ParsedText:
        """Split decoded completion text. Malformed calls stay in `content`; never raise."""
        ...


def split_reasoning(text: str, open_tag: str = "<think>", close_tag: str = "</think>") -> tuple[str, str]:
    """(reasoning, rest). Handles a missing open tag, as when the template's generation prompt
    already opened the reasoning block (Qwen3 thinking templates)."""
    head, sep, tail = text.partition(close_tag)
    if not sep:
        stripped = text.lstrip()
        if stripped.startswith(open_tag):  # unterminated reasoning (cut by max_tokens)
            return stripped[len(open_tag):].strip(), ""
        return "", text
    head = head.lstrip()
    head = head.removeprefix(open_tag)
    return head.strip(), tail.lstrip()


def extract_blocks(
    text: str, block: re.Pattern[str], decode: Callable[[str], ParsedCall | Iterable[ParsedCall] | None]
) -> tuple[str, tuple[ParsedCall, ...]]:
    """(content, calls): each `block` match whose group 1 decodes (to one call or several) is cut out;
    a block that does not decode (None) stays in the content, so a malformed call is never lost."""
    calls: list[ParsedCall] = []
    kept: list[str] = []
    cursor = 0
    for match in block.finditer(text):
        decoded = decode(match.group(1))
        if decoded is None:
            continue
        kept.append(text[cursor : match.start()])
        cursor = match.end()
        if isinstance(decoded, ParsedCall):
            calls.append(decoded)
        else:
            calls.extend(decoded)
    kept.append(text[cursor:])
    return "".join(kept).strip(), tuple(calls)


def json_arguments(value: Any) -> str:
    """Arguments as JSON object text: dicts are dumped, JSON strings kept, anything else wrapped."""
    if isinstance(value, str):
        try:
            if isinstance(json.loads(value), dict):
                return value
        except ValueError:
            pass
        return json.dumps({"input": value}, ensure_ascii=False)
    if value is None:
        return "{}"
    if not isinstance(value, dict):
        return json.dumps({"input": value}, ensure_ascii=False)
    return json.dumps(value, ensure_ascii=False)
