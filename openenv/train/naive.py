"""The naive-capture control: training rows as a text-in/text-out proxy builds them.

A proxy that keeps only the conversation, not the ids the engine sampled, builds each training row at the
end of a sequence by rendering the last request's messages (what the harness sent back) plus the last
reply through the chat template, and marks the assistant messages as trained by prefix length. Every
earlier reply in that row is the harness's *echo*, not the model's sample: the harness parsed the tool
call and serialized it again in its own way (pi sends `{"command":"ls"}` where the model sampled
`{"command": "ls"}`), dropped or rewrote text, or kept only the arguments as a JSON object that the proxy
must serialize itself (Anthropic's `input`, Gemini's `args`: the dialect's `json.dumps`). The template
renders an arguments string as given and an object with `tojson`, so the echo's bytes reach the row.

`naive_rows` builds those rows from a session's `Trajectory` and counts, per reply, the sampled tokens
whose ids the naive row does not reproduce (a difflib alignment of the sampled ids against the ids
the naive row holds for that reply). It exists to measure what exact tokens are worth
(`research/learning/learning-findings.md`), never to train a model for use.

A naive proxy has no logprobs for tokens it did not sample: an aligned token keeps the sampled
logprob, any other gets 0.0 (the `local` backend's loss does not read them; vLLM's importance-sampling
correction would).
"""

from __future__ import annotations

from dataclasses import dataclass
from difflib import SequenceMatcher
from typing import Any

from openenv.capture.canonical import Completion, Message, TextPart, ThinkingPart, ToolCallPart
from openenv.capture.renderer import Renderer, template_messages, template_tools
from openenv.capture.trajectory import SequenceRow, TrainingSequence, Trajectory

__all__ = ["NaiveRows", "echoed_messages", "naive_row", "naive_rows", "reply_message"]


@dataclass(frozen=True)
class NaiveRows:
    """A session's naive rows and how far they are from the sampled tokens.

    Attributes:
        rows: one row per training sequence, in the sequences' order.
        sampled: tokens the model sampled in those sequences.
        changed: sampled tokens the naive rows do not hold at their reply's place (replaced or dropped).
    """

    rows: tuple[SequenceRow, ...]
    sampled: int
    changed: int

    @property
    def changed_share(self) -> float:
        return self.changed / self.sampled if self.sampled else 0.0


def reply_message(completion: Completion) -> Message:
    """The reply as a text proxy returned it: its text, reasoning and parsed calls (arguments as produced)."""
    parts: list[Any] = []
    if completion.reasoning:
        parts.append(ThinkingPart(text=completion.reasoning))
    if completion.text:
        parts.append(TextPart(text=completion.text))
    parts.extend(completion.tool_calls)
    return Message(role="assistant", parts=tuple(parts))


def echoed_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """Template dicts of canonical messages with each tool call's arguments as the string the harness sent
    (the template renders a string as given), not re-parsed as the proxy's own renderer does."""
    out = template_messages(messages)
    calls = iter(
        [p for m in messages if m.role == "assistant" for p in m.parts if isinstance(p, ToolCallPart)]
    )
    for message in out:
        for call in message.get("tool_calls", []):
            call["function"]["arguments"] = next(calls).arguments
    return out


def naive_row(sequence: TrainingSequence, renderer: Renderer) -> tuple[SequenceRow, int, int]:
    """One sequence's naive row; returns (row, sampled tokens, sampled tokens not reproduced)."""
    head = sequence.head
    if head.completion is None:
        raise ValueError(f"sequence {sequence.index} ends in turn {head.id} without a completion")
    messages = [*sequence.messages, reply_message(head.completion)]
    dicts, tools = echoed_messages(messages), template_tools(sequence.tools)
    spans: list[tuple[int, int]] = []  # each assistant message's token span, by prefix length
    for i, message in enumerate(dicts):
        if message["role"] != "assistant":
            continue
        before = renderer.encode(renderer.render(dicts[:i], tools, generation_prompt=True))
        through = renderer.encode(renderer.render(dicts[: i + 1], tools, generation_prompt=False))
        spans.append((len(before), len(through)))
    ids = renderer.encode(renderer.render(dicts, tools, generation_prompt=False))
    start = spans[0][0] if spans else len(ids)
    mask = [0] * len(ids)
    for a, b in spans:
        mask[a:b] = [1] * (b - a)
    logprobs = [0.0] * len(ids)
    replies = [t for t in sequence.turns if t.completion is not None]
    # The sequence's replies are the last len(replies) assistant messages (earlier ones came from elsewhere).
    sampled = changed = 0
    for turn, (a, b) in zip(replies, spans[len(spans) - len(replies) :], strict=True):
        assert turn.completion is not None
        got = list(turn.completion.token_ids)
        blocks = SequenceMatcher(None, got, ids[a:b], autojunk=False).get_matching_blocks()
        kept = 0
        for block in blocks:
            for k in range(block.size):
                logprobs[a + block.b + k] = turn.completion.logprobs[block.a + k]
            kept += block.size
        sampled, changed = sampled + len(got), changed + len(got) - kept
    row = SequenceRow(
        prompt_ids=ids[:start],
        completion_ids=ids[start:],
        logprobs=logprobs[start:],
        env_mask=mask[start:],
        turn_ids=[t.id for t in sequence.turns],
        origin=sequence.origin,
        parent=sequence.parent,
    )
    return row, sampled, changed


def naive_rows(trajectory: Trajectory, renderer: Renderer) -> NaiveRows:
    """Every training sequence of a session as a naive proxy's row (see the module doc)."""
    rows, sampled, changed = [], 0, 0
    for sequence in trajectory.sequences:
        row, s, c = naive_row(sequence, renderer)
        rows.append(row)
        sampled, changed = sampled + s, changed + c
    return NaiveRows(tuple(rows), sampled, changed)
