"""Anthropic Messages <-> canonical: the pure mapping, the SSE grammar and the error format."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any, Literal, assert_never

from pydantic import BaseModel

from openenv.capture.canonical import (
    CanonicalRequest,
    Completion,
    Message,
    Part,
    SamplingParams,
    TextPart,
    ThinkingPart,
    Tool,
    ToolCallPart,
    ToolChoice,
    ToolResultPart,
)
from openenv.capture.dialects._body import ItemMemo, ValueMemo
from openenv.capture.dialects._shared import (
    bearer_token,
    chunk_text,
    json_schema_format,
    response_id,
)
from openenv.capture.dialects.anthropic import protocol as p
from openenv.capture.dialects.base import RequestContext, ServerSentEvent, StreamStyle
from openenv.capture.dialects.state import CacheSpec, DialectState
from openenv.errors import BackendUnavailable, CapacityError, OpenEnvError, Unsupported

__all__ = [
    "AnthropicDialect",
    "count_tokens_body",
    "error_body",
    "from_canonical",
    "parse",
    "session_token",
    "sse_events",
    "to_canonical",
]

NAME = "anthropic"


def parse(body: bytes, ctx: RequestContext, state: DialectState) -> p.MessagesRequest:
    return state.caches(_SPEC).body.parse(body)


def session_token(ctx: RequestContext) -> str | None:
    return bearer_token(ctx.headers, "x-api-key")


# ---- request -> canonical ------------------------------------------------------------------------


def to_canonical(req: p.MessagesRequest, state: DialectState) -> CanonicalRequest:
    caches = state.caches(_SPEC)
    return CanonicalRequest(
        model=req.model,
        messages=_system(req.system, caches.values) + caches.history.convert(req.messages),
        sampling=_sampling(req),
        tools=_tools(req.tools),
        tool_choice=_tool_choice(req.tool_choice),
        stream=req.stream,
    )


def _system(system: str | list[p.TextBlock] | None, values: ValueMemo) -> tuple[Message, ...]:
    """The system message, the same object every turn (one or two system prompts per harness)."""
    texts = [system] if isinstance(system, str) else [b.text for b in system or []]
    key = tuple(t for t in texts if t)
    return values.get(("system", key), lambda: _system_message(key))


def _system_message(texts: tuple[str, ...]) -> tuple[Message, ...]:
    return (Message(role="system", parts=tuple(TextPart(text=t) for t in texts)),) if texts else ()


def _fold(
    items: ItemMemo[Any], values: ValueMemo, names: Mapping[str, str], msg: p.Message
) -> tuple[Mapping[str, str], tuple[Message, ...]]:
    """One message's canonical messages (`DialectState` continues a resent history from the converted
    list it extends). `names` (tool_use id -> tool name, for templates that print it) carries to later
    tool results; it is copied, never changed, when a message adds calls."""
    # A message converts once (by identity, see ItemMemo); its tool results also depend on names.
    known = _result_names(msg, names)
    converted: tuple[Message, ...] = items.get(msg, lambda: _message(msg, names), known)
    calls = {
        c.id: c.name
        for m in converted
        if m.role == "assistant"
        for c in m.parts
        if isinstance(c, ToolCallPart)
    }
    return ({**names, **calls} if calls else names), converted


_SPEC: CacheSpec[p.MessagesRequest, Mapping[str, str], Message] = CacheSpec(
    NAME, p.MessagesRequest, ("messages", "tools"), _fold, {}
)


def _message(msg: p.Message, names: Mapping[str, str]) -> tuple[Message, ...]:
    blocks: list[p.RequestBlock] = (
        [p.TextBlock(text=msg.content)] if isinstance(msg.content, str) else msg.content
    )
    match msg.role:
        case "system" | "user":
            # An empty `{role: system, content: []}` (Claude Code --bare, between turns) adds nothing.
            return tuple(_user_like(msg.role, blocks, names))
        case "assistant":
            return (Message(role="assistant", parts=_assistant_parts(blocks)),)
        case _:
            assert_never(msg.role)


def _result_names(msg: p.Message, names: Mapping[str, str]) -> tuple[str | None, ...] | None:
    """The tool names a user message's tool results will carry (all its conversion depends on)."""
    if msg.role == "assistant" or isinstance(msg.content, str):
        return None
    return tuple(names.get(b.tool_use_id) for b in msg.content if b.type == "tool_result")


def _user_like(
    role: Literal["system", "user"], blocks: list[p.RequestBlock], names: Mapping[str, str]
) -> list[Message]:
    """Text blocks become `role` messages; each tool_result becomes its own `tool` message, in order."""
    out: list[Message] = []
    texts: list[Part] = []
    for block in blocks:
        if block.type == "tool_result":
            if texts:
                out.append(Message(role=role, parts=tuple(texts)))
                texts = []
            out.append(Message(role="tool", parts=(_tool_result(block, names),)))
        elif block.type == "text":
            texts.append(TextPart(text=block.text))
        else:
            raise Unsupported(
                f"{block.type!r} blocks are not supported in {role} messages; send text and "
                "tool_result blocks",
                param="messages",
            )
    if texts:
        out.append(Message(role=role, parts=tuple(texts)))
    return out


def _tool_result(block: p.ToolResultBlock, names: Mapping[str, str]) -> ToolResultPart:
    content = block.content
    if isinstance(content, list):
        if any(b.type != "text" for b in content):
            raise Unsupported(
                "tool_result content must be text blocks; image blocks are not supported", param="messages"
            )
        content = "\n".join(b.text for b in content if isinstance(b, p.TextBlock))
    return ToolResultPart(
        tool_call_id=block.tool_use_id,
        content=content or "",
        name=names.get(block.tool_use_id),
        is_error=block.is_error,
    )


def _assistant_parts(blocks: list[p.RequestBlock]) -> tuple[Part, ...]:
    parts: list[Part] = []
    for block in blocks:
        match block.type:
            case "text":
                parts.append(TextPart(text=block.text))
            case "thinking":
                parts.append(ThinkingPart(text=block.thinking, signature=block.signature or None))
            case "tool_use":
                args = json.dumps(block.input, ensure_ascii=False)
                parts.append(ToolCallPart(id=block.id, name=block.name, arguments=args))
            case "redacted_thinking":
                pass  # encrypted by Anthropic; nothing a local model can read
            case _:
                raise Unsupported(
                    f"{block.type!r} blocks are not supported in assistant messages", param="messages"
                )
    return tuple(parts)


def _sampling(req: p.MessagesRequest) -> SamplingParams:
    return SamplingParams(
        max_tokens=req.max_tokens,
        temperature=req.temperature,
        top_p=req.top_p,
        top_k=req.top_k,
        stop=tuple(req.stop_sequences or ()),
        json_schema=json_schema_format(req.output_config),
    )


def _tools(tools: list[p.Tool] | None) -> tuple[Tool, ...]:
    """Client tools only: server tools and `defer_loading` tools are not offered (see `p.Tool`)."""
    return tuple(
        Tool(name=t.name, description=t.description or "", parameters=t.input_schema or {})
        for t in tools or []
        if t.offered
    )


def _tool_choice(choice: p.ToolChoice | None) -> ToolChoice:
    match None if choice is None else choice.type:
        case None | "auto":
            return ToolChoice()
        case "any":
            return ToolChoice(mode="required")
        case "none":
            return ToolChoice(mode="none")
        case "tool":
            return ToolChoice(mode="named", name=choice.name)  # type: ignore[union-attr]  # `tool` is the named variant of the union, which has `name`
    raise AssertionError(choice)


# ---- completion -> reply -------------------------------------------------------------------------

_STOP_REASONS: dict[str, p.StopReason] = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
}


def _blocks(done: Completion) -> list[p.ResponseBlock]:
    """thinking, then text, then one tool_use per call: the order Claude itself answers in."""
    blocks: list[p.ResponseBlock] = []
    if done.reasoning:
        blocks.append(p.ResponseThinkingBlock(thinking=done.reasoning))
    if done.text or not done.tool_calls:
        blocks.append(p.ResponseTextBlock(text=done.text))
    for call in done.tool_calls:
        blocks.append(p.ResponseToolUseBlock(id=call.id, name=call.name, input=call.parsed_arguments()))
    return blocks


def from_canonical(done: Completion, req: p.MessagesRequest) -> p.MessagesResponse:
    return p.MessagesResponse(
        id=response_id("msg_", done.id),
        content=_blocks(done),
        model=done.model,
        stop_reason=_STOP_REASONS[done.finish_reason],
        usage=p.Usage(input_tokens=done.usage.prompt_tokens, output_tokens=done.usage.completion_tokens),
    )


def sse_events(done: Completion, req: p.MessagesRequest) -> Iterator[ServerSentEvent]:
    """message_start -> ping -> per block: start, deltas, stop -> message_delta -> message_stop."""
    head = from_canonical(done, req).model_copy(
        update={
            "content": [],
            "stop_reason": None,
            "usage": p.Usage(input_tokens=done.usage.prompt_tokens, output_tokens=0),
        }
    )
    yield _event(p.MessageStartEvent(message=head))
    yield _event(p.PingEvent())
    for index, block in enumerate(_blocks(done)):
        yield from _block_events(index, block)
    delta = p.MessageDelta(stop_reason=_STOP_REASONS[done.finish_reason])
    yield _event(
        p.MessageDeltaEvent(
            delta=delta,
            usage=p.MessageDeltaUsage(
                output_tokens=done.usage.completion_tokens, input_tokens=done.usage.prompt_tokens
            ),
        )
    )
    yield _event(p.MessageStopEvent())


def _block_events(index: int, block: p.ResponseBlock) -> Iterator[ServerSentEvent]:
    deltas: list[p.TextDelta | p.InputJSONDelta | p.ThinkingDelta]
    match block:
        case p.ResponseTextBlock():
            start: p.ResponseBlock = p.ResponseTextBlock(text="")
            deltas = [p.TextDelta(text=piece) for piece in chunk_text(block.text)]
        case p.ResponseThinkingBlock():
            start = p.ResponseThinkingBlock(thinking="")
            deltas = [
                p.ThinkingDelta(thinking=piece) for piece in chunk_text(block.thinking, channel="reasoning")
            ]
        case p.ResponseToolUseBlock():
            start = p.ResponseToolUseBlock(id=block.id, name=block.name, input={})
            args = json.dumps(block.input, ensure_ascii=False)
            deltas = [
                p.InputJSONDelta(partial_json=piece)
                for piece in chunk_text(args, channel=f"arguments{index}")
            ]
        case _:
            assert_never(block)
    yield _event(p.ContentBlockStartEvent(index=index, content_block=start))
    for delta in deltas:
        yield _event(p.ContentBlockDeltaEvent(index=index, delta=delta))
    yield _event(p.ContentBlockStopEvent(index=index))


def _event(model: BaseModel) -> ServerSentEvent:
    return ServerSentEvent(event=model.type, data=model.model_dump_json())  # type: ignore[attr-defined]  # every event model declares a `type` Literal; BaseModel does not


# ---- errors and token counting ---------------------------------------------------------------------

_ERROR_TYPES: dict[int, p.AnthropicErrorType] = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
}


def error_body(err: OpenEnvError) -> tuple[int, BaseModel]:
    """Anthropic error JSON. A backend outage or full server is 529 `overloaded_error`, which
    Claude Code retries with back-off."""
    if isinstance(err, BackendUnavailable | CapacityError):
        status, kind = 529, "overloaded_error"
    else:
        status = err.status_code
        kind = _ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
    return status, p.AnthropicErrorBody(error=p.AnthropicErrorDetail(type=kind, message=err.message))


def count_tokens_body(n_tokens: int, req: p.MessagesRequest) -> p.CountTokensResponse:
    return p.CountTokensResponse(input_tokens=n_tokens)


class AnthropicDialect:
    """`POST /v1/messages` and `POST /v1/messages/count_tokens`."""

    name = NAME
    # In-stream errors are `event: error`; once the message started, keep-alives are Anthropic's ping events.
    stream_style = StreamStyle(error_event="error", ping=b'event: ping\ndata: {"type":"ping"}\n\n')
    parse = staticmethod(parse)
    to_canonical = staticmethod(to_canonical)
    from_canonical = staticmethod(from_canonical)
    sse_events = staticmethod(sse_events)
    error_body = staticmethod(error_body)
    session_token = staticmethod(session_token)
    count_tokens_body = staticmethod(count_tokens_body)
