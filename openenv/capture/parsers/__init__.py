"""Completion parsers by model family, and the one registry naming them.

A new format is a module with a class implementing `CompletionParser` plus one line in `PARSERS`.
"""

from __future__ import annotations

from openenv.capture.parsers.base import CompletionParser, ParsedCall, ParsedText, split_reasoning
from openenv.capture.parsers.detect import detect_parser
from openenv.capture.parsers.hermes import HermesParser
from openenv.capture.parsers.lfm2 import Lfm2Parser
from openenv.capture.parsers.llama3_json import Llama3JsonParser
from openenv.capture.parsers.qwen3_coder import Qwen3CoderParser
from openenv.errors import BadRequest

__all__ = [
    "PARSERS",
    "CompletionParser",
    "ParsedCall",
    "ParsedText",
    "detect_parser",
    "get_parser",
    "split_reasoning",
]

PARSERS: dict[str, CompletionParser] = {
    "hermes": HermesParser(),
    "qwen3_coder": Qwen3CoderParser(),
    "lfm2": Lfm2Parser(),
    "llama3_json": Llama3JsonParser(),
}


def get_parser(name: str) -> CompletionParser:
    """The registered parser called `name`.

    Raises:
        BadRequest: no parser has that name; the message lists the known ones.
    """
    try:
        return PARSERS[name]
    except KeyError:
        raise BadRequest(f"unknown tool-call parser {name!r}; known: {', '.join(sorted(PARSERS))}") from None
