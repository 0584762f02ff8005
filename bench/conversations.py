"""The conversations the proxy benchmarks play: a coding agent's tool loop over real-looking text.

The system prompt and eight tool schemas are the same in every conversation (a harness's, cached by
the renderer as a head); every turn brings one new block of the stdlib's own sources, so the cost of
a turn is that of its new text. `fresh` hands out blocks no conversation of the run has used yet
(one counter per process: every bench that imports this module shares it).
"""

from __future__ import annotations

import functools
import json
import sysconfig
from pathlib import Path
from typing import Any

__all__ = [
    "CALL",
    "SYSTEM",
    "TOOLS",
    "conversation_bodies",
    "fresh",
    "restart_fresh",
    "tool_outputs",
]

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": f"tool_{i}",
            "description": "Run a shell command in the workspace and return its output. " * 4,
            "parameters": {
                "type": "object",
                "properties": {"command": {"type": "string"}, "timeout": {"type": "integer"}},
                "required": ["command"],
            },
        },
    }
    for i in range(8)
]
SYSTEM = "You are a coding agent working in a repository. Use the tools to inspect and edit files. " * 20
CALL = '<tool_call>\n{"name": "tool_0", "arguments": {"command": "cat module.py"}}\n</tool_call>'


@functools.cache
def _corpus() -> str:
    """Real-looking tool output: the stdlib's own sources (~13 MB, deterministic)."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(
        p for p in stdlib.rglob("*.py") if not {"test", "tests", "site-packages", "idlelib"} & set(p.parts)
    )
    return "".join(p.read_text(errors="replace") for p in files)


def tool_outputs(n: int, chars: int = 1900, start: int = 0) -> list[str]:
    """`n` consecutive `chars`-long slices of the corpus from slice number `start` (wrapping around)."""
    text = _corpus()
    slices = len(text) // chars
    return [text[(k % slices) * chars : (k % slices + 1) * chars] for k in range(start, start + n)]


_SAME_SLICES = 61  # slices 0-60: the task and tool results every "same" conversation plays
_next_fresh = _SAME_SLICES


def fresh(n: int) -> int:
    """The first of `n + 1` corpus slices (a task and `n` tool results) that no conversation of this
    run has used, so distinct conversations share no text with each other nor with earlier rows
    (whose results a cache may still hold)."""
    global _next_fresh
    first, _next_fresh = _next_fresh, _next_fresh + n + 1
    return first


def restart_fresh() -> None:
    """Hand out the same fresh slices again, from the first: each target plays the same text."""
    global _next_fresh
    _next_fresh = _SAME_SLICES


def conversation_bodies(turns: int, tag: str = "", chars: int = 1900, start: int = 0) -> list[bytes]:
    """Request k of a tool loop: system, task, then k (assistant tool call, tool result) pairs.

    The task quotes a failing test's report, and every tool result is a file's text: corpus slices from
    `start` on, so every turn, the first included, brings one new block of `chars` characters and flat
    cost means cost that does not grow with the conversation. A `tag` starts every block (a marker;
    `start=fresh(turns)` is what keeps conversations apart)."""
    report, *outputs = (tag + out for out in tool_outputs(turns + 1, chars, start))
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": f"Fix the failing test in module.py. The test report:\n{report}"},
    ]
    bodies = []
    for k, output in enumerate(outputs[:turns]):
        bodies.append(json.dumps({"model": "tiny", "messages": messages, "tools": TOOLS}).encode())
        call = {
            "id": f"call_{k}",
            "type": "function",
            "function": {"name": "tool_0", "arguments": '{"command": "cat module.py"}'},
        }
        messages = messages + [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"call_{k}", "content": output},
        ]
    return bodies
