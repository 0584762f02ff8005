"""Completion parsers by model family, and the one registry naming them.

A new format is a module with a class implementing `CompletionParser` plus one line in `PARSERS`.
"""

from __future__ import annotations

from openenv.capture.parsers.base import CompletionParser, ParsedCall, ParsedText, split_reasoning
from openenv.capture.parsers.hermes import HermesParser
from openenv.errors import BadRequest

__all__ = ["PARSERS", "CompletionParser", "ParsedCall", "ParsedText", "get_parser", "split_reasoning"]

PARSERS: dict[str, CompletionParser] = {
    "hermes": HermesParser(),
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
