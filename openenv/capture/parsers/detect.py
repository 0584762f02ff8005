"""Pick a tool-call parser from a model's chat template, so `--tool-call-parser` is rarely needed.

The template shows how the model was taught to write tool calls (it renders earlier calls in the
same format), so a few marker strings are enough. The order matters: Qwen3-Coder templates also
contain `<tool_call>`, and LFM2's `<|tool_call_start|>` contains no other marker.
"""

from __future__ import annotations

__all__ = ["detect_parser"]

# (parser name, markers that must all appear in the template)
_RULES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("lfm2", ("<|tool_call_start|>",)),
    ("lfm2", ("<|tool_list_start|>",)),  # LFM2 v1: tools listed, calls in the same pythonic form
    ("qwen3_coder", ("<function=", "<parameter=")),
    ("hermes", ("<tool_call>",)),
    ("llama3_json", ("<|start_header_id|>", '"parameters"')),
)


def detect_parser(chat_template: str | None) -> str | None:
    """The registered parser name whose format `chat_template` renders, or None if none matches."""
    if not chat_template:
        return None
    for name, markers in _RULES:
        if all(marker in chat_template for marker in markers):
            return name
    return None
