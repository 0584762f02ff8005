"""LFM2 pythonic format: `<|tool_call_start|>[get_weather(city="Paris"), f(a=1)]<|tool_call_end|>`.

The call list is Python syntax, so it is read with the standard library's `ast` (never evaluated):
each element must be a call with keyword arguments whose values are literals.
"""

from __future__ import annotations

import ast
import json
import re

from openenv.capture.parsers.base import ParsedCall, TagParser

__all__ = ["Lfm2Parser", "pythonic_calls"]

START, END = "<|tool_call_start|>", "<|tool_call_end|>"
_BLOCK = re.compile(re.escape(START) + r"(.*?)(?:" + re.escape(END) + r"|$)", re.DOTALL)


def pythonic_calls(source: str) -> list[ParsedCall] | None:
    """`[f(a=1), g.h(b="x")]` (or a single bare call) as calls; None when it is not that shape."""
    try:
        tree = ast.parse(source.strip(), mode="eval").body
    except SyntaxError:
        return None
    nodes = tree.elts if isinstance(tree, ast.List) else [tree]
    calls = []
    for node in nodes:
        if not isinstance(node, ast.Call) or node.args or any(k.arg is None for k in node.keywords):
            return None
        try:
            args = {k.arg: ast.literal_eval(k.value) for k in node.keywords}
        except ValueError:
            return None
        calls.append(ParsedCall(name=ast.unparse(node.func), arguments=json.dumps(args, ensure_ascii=False)))
    return calls


class Lfm2Parser(TagParser):
    """LiquidAI LFM2 / LFM2.5 pythonic tool calls; reasoning inside `<think>`."""

    name = "lfm2"
    block, close = _BLOCK, END
    decode = staticmethod(pythonic_calls)
