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
from typing import Any, ClassVar, Literal, Protocol, runtime_checkable

__all__ = [
    "CallAttempt",
    "CompletionParser",
    "ParsedCall",
    "ParsedText",
    "TagParser",
    "extract_blocks",
    "json_arguments",
    "split_reasoning",
]


@dataclass(frozen=True, slots=True)
class ParsedCall:
    """One tool call found in the text; `arguments` is JSON object text."""

    name: str
    arguments: str


CallStatus = Literal["parsed", "malformed", "missing_close"]


@dataclass(frozen=True, slots=True)
class CallAttempt:
    """One place the model started a tool call, and whether it parsed.

    `parsed`: the call decoded and its block was closed. `malformed`: the block was closed but its body
    does not decode (bad JSON, no name, not a call); it stays in the content. `missing_close`: the block
    never closed (cut by the end of the turn or `max_tokens`); `calls` says whether its body decoded
    anyway (then it is kept as a call). `start`/`end` are character offsets in the parsed text.
    """

    status: CallStatus
    start: int
    end: int
    calls: int = 0  # tool calls the block yielded


@dataclass(frozen=True, slots=True)
class ParsedText:
    """A completion split into its three channels, plus every tool-call attempt and its status."""

    content: str
    reasoning: str = ""
    tool_calls: tuple[ParsedCall, ...] = ()
    attempts: tuple[CallAttempt, ...] = ()


@runtime_checkable
class CompletionParser(Protocol):
    """One model family's output format. Set `name` in ALL implementations."""

    name: str

    def parse(self, text: str) -> ParsedText:
        """Split decoded completion text. Malformed calls stay in `content`; never raise."""
        ...


class TagParser:
    """A format whose calls sit in tagged blocks after an optional `<think>` block: a subclass names the
    block (`block`, its group 1 the body; `close`, its closing tag) and decodes a body (`decode`, to one
    call, several, or None when malformed). The parse itself is the same for every such format."""

    name: ClassVar[str]
    block: ClassVar[re.Pattern[str]]
    close: ClassVar[str]

    @staticmethod
    def decode(body: str) -> ParsedCall | Iterable[ParsedCall] | None:
        raise NotImplementedError

    def parse(self, text: str) -> ParsedText:
        reasoning, rest = split_reasoning(text)
        attempts: list[CallAttempt] = []
        content, calls = extract_blocks(
            rest, self.block, self.decode, close=self.close, attempts=attempts, offset=len(text) - len(rest)
        )
        return ParsedText(content=content, reasoning=reasoning, tool_calls=calls, attempts=tuple(attempts))


def split_reasoning(text: str, open_tag: str = "<think>", close_tag: str = "</think>") -> tuple[str, str]:
    """(reasoning, rest). Handles a missing open tag, as when the template's generation prompt
    already opened the reasoning block (Qwen3 thinking templates)."""
    head, sep, tail = text.partition(close_tag)
    if not sep:
        stripped = text.lstrip()
        if stripped.startswith(open_tag):  # unterminated reasoning (cut by max_tokens)
            return stripped[len(open_tag) :].strip(), ""
        return "", text
    head = head.lstrip()
    head = head.removeprefix(open_tag)
    return head.strip(), tail.lstrip()


def extract_blocks(
    text: str,
    block: re.Pattern[str],
    decode: Callable[[str], ParsedCall | Iterable[ParsedCall] | None],
    *,
    close: str | None = None,
    attempts: list[CallAttempt] | None = None,
    offset: int = 0,
) -> tuple[str, tuple[ParsedCall, ...]]:
    """(content, calls): each `block` match whose group 1 decodes (to one call or several) is cut out;
    a block that does not decode (None) stays in the content, so a malformed call is never lost.

    With `attempts`, each match is appended as a `CallAttempt` (spans shifted by `offset`); `close` is
    the block's closing tag, whose absence makes the status `missing_close`."""
    calls: list[ParsedCall] = []
    kept: list[str] = []
    cursor = 0
    for match in block.finditer(text):
        decoded = decode(match.group(1))
        if attempts is not None:
            found = [decoded] if isinstance(decoded, ParsedCall) else list(decoded or [])
            closed = close is None or match.group(0).rstrip().endswith(close)
            status: CallStatus = (
                "missing_close" if not closed else "parsed" if decoded is not None else "malformed"
            )
            attempts.append(CallAttempt(status, offset + match.start(), offset + match.end(), len(found)))
            decoded = found if decoded is not None and not isinstance(decoded, ParsedCall) else decoded
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
