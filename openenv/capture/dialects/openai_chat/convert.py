"""OpenAI Chat Completions <-> canonical: the pure mapping, the chunk grammar and the error format."""

from __future__ import annotations

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
from openenv.capture.dialects._shared import bearer_token, chunk_text, openai_error_body, response_id
from openenv.capture.dialects.base import RequestContext, ServerSentEvent, StreamStyle
from openenv.capture.dialects.openai_chat import protocol as p
from openenv.capture.dialects.state import CacheSpec, DialectState
from openenv.errors import OpenEnvError, Unsupported

__all__ = [
    "OpenAIChatDialect",
    "error_body",
    "from_canonical",
    "models_body",
    "parse",
    "session_token",
    "sse_events",
    "to_canonical",
]

NAME = "openai_chat"


def parse(body: bytes, ctx: RequestContext, state: DialectState) -> p.ChatCompletionRequest:
    return state.caches(_SPEC).body.parse(body)


def session_token(ctx: RequestContext) -> str | None:
    return bearer_token(ctx.headers, "api-key")


# ---- request -> canonical ------------------------------------------------------------------------


def to_canonical(req: p.ChatCompletionRequest, state: DialectState) -> CanonicalRequest:
    if req.n is not None and req.n > 1:
        raise Unsupported(
            f"n={req.n} is not supported; the proxy samples one choice per request (n=1)", param="n"
        )
    caches = state.caches(_SPEC)
    return CanonicalRequest(
        model=req.model,
        messages=caches.history.convert(req.messages),
        sampling=_sampling(req),
        tools=_tools(req.tools, caches.items),
        tool_choice=_tool_choice(req.tool_choice),
        stream=bool(req.stream),
    )


def _fold(
    items: ItemMemo[Any], values: ValueMemo, names: Mapping[str, str], msg: p.ChatMessage
) -> tuple[Mapping[str, str], tuple[Message]]:
    """One message's canonical form (`DialectState` continues a resent history from the converted list
    it extends, so a turn converts its new messages). `names` (tool_call_id -> function name, for
    templates that print it) carries to later tool messages; it is copied, never changed."""
    name = names.get(msg.tool_call_id) if isinstance(msg, p.ToolMessage) and not msg.name else None
    converted: Message = items.get(msg, lambda: _message(msg, name, values), name)
    calls = {c.id: c.name for c in converted.parts if isinstance(c, ToolCallPart)}
    return ({**names, **calls} if calls else names), (converted,)


_SPEC: CacheSpec[p.ChatCompletionRequest, Mapping[str, str], Message] = CacheSpec(
    NAME, p.ChatCompletionRequest, ("messages", "tools"), _fold, {}
)


# Harnesses resend the whole history every turn; converting each message once (by value, `values`)
# keeps a turn's cost flat in conversation length and lets the session compare history by identity.
def _message(msg: p.ChatMessage, known_name: str | None, values: ValueMemo) -> Message:
    match msg.role:
        case "system" | "developer":
            text = _text(msg.content)
            return values.get(("system", text), lambda: _text_message("system", text))
        case "user":
            text = _text(msg.content)
            return values.get(("user", text), lambda: _text_message("user", text))
        case "assistant":
            assert isinstance(msg, p.AssistantMessage)
            calls = tuple((c.id, c.function.name, c.function.arguments) for c in msg.tool_calls or ())
            key = ("assistant", _text(msg.content), msg.reasoning_content or msg.reasoning or "", calls)
            return values.get(key, lambda: _assistant_message(*key[1:]))
        case "tool":
            assert isinstance(msg, p.ToolMessage)
            key = ("tool", msg.tool_call_id, _text(msg.content), msg.name or known_name)
            return values.get(key, lambda: _tool_message(*key[1:]))  # type: ignore[arg-type]  # the key's tail is _tool_message's arguments, a tuple mypy cannot split
        case _:
            assert_never(msg.role)


def _text_message(role: Literal["system", "user"], text: str) -> Message:
    return Message(role=role, parts=(TextPart(text=text),) if text else ())


def _assistant_message(text: str, reasoning: str, calls: tuple[tuple[str, str, str], ...]) -> Message:
    parts: list[Part] = [ThinkingPart(text=reasoning)] if reasoning else []
    if text:
        parts.append(TextPart(text=text))
    parts.extend(ToolCallPart(id=i, name=n, arguments=a) for i, n, a in calls)
    return Message(role="assistant", parts=tuple(parts))


def _tool_message(call_id: str, content: str, name: str | None) -> Message:
    return Message(role="tool", parts=(ToolResultPart(tool_call_id=call_id, content=content, name=name),))


def _text(content: p.Content) -> str:
    """Text of a string or a part array; non-text parts are refused in one line."""
    if content is None or isinstance(content, str):
        return content or ""
    pieces = []
    for part in content:
        if part.type not in ("text", "refusal"):
            raise Unsupported(
                f"content part type {part.type!r} is not supported; send text parts only", param="messages"
            )
        pieces.append(part.text or part.refusal or "")
    return "".join(pieces)


def _sampling(req: p.ChatCompletionRequest) -> SamplingParams:
    stop = (req.stop,) if isinstance(req.stop, str) else tuple(req.stop or ())
    return SamplingParams(
        max_tokens=req.max_completion_tokens or req.max_tokens,
        temperature=req.temperature,
        top_p=req.top_p,
        top_k=req.top_k,
        min_p=req.min_p,
        presence_penalty=req.presence_penalty,
        frequency_penalty=req.frequency_penalty,
        repetition_penalty=req.repetition_penalty,
        seed=req.seed,
        stop=stop,
    )


def _tools(tools: list[p.FunctionTool] | None, items: ItemMemo[Any]) -> tuple[Tool, ...]:
    """Each parsed tool converts once: a resent tool list costs a lookup per tool."""
    return tuple(items.get(tool, lambda: _tool(tool)) for tool in tools or [])  # noqa: B023


def _tool(tool: p.FunctionTool) -> Tool:
    fn = tool.function
    schema = fn.parameters or {"type": "object", "properties": {}}
    return Tool(name=fn.name, description=fn.description or "", parameters=schema)


def _tool_choice(choice: str | p.NamedToolChoice | None) -> ToolChoice:
    if choice is None:
        return ToolChoice()
    if isinstance(choice, p.NamedToolChoice):
        return ToolChoice(mode="named", name=choice.function.name)
    return ToolChoice(mode=choice)  # type: ignore[arg-type]  # the remaining wire values are ToolChoice's own mode names


# ---- completion -> reply -------------------------------------------------------------------------


def from_canonical(done: Completion, req: p.ChatCompletionRequest) -> p.ChatCompletion:
    calls = [
        p.ResponseToolCall(id=c.id, function=p.FunctionCall(name=c.name, arguments=c.arguments))
        for c in done.tool_calls
    ]
    message = p.ResponseMessage(
        content=done.text if done.text or not calls else None,
        tool_calls=calls or None,
        reasoning_content=done.reasoning or None,
    )
    return p.ChatCompletion(
        id=response_id("chatcmpl-", done.id),
        created=done.created,
        model=done.model,
        choices=[p.Choice(message=message, finish_reason=done.finish_reason)],
        usage=_usage(done),
    )


def _usage(done: Completion) -> p.UsageInfo:
    u = done.usage
    return p.UsageInfo(
        prompt_tokens=u.prompt_tokens, completion_tokens=u.completion_tokens, total_tokens=u.total_tokens
    )


def sse_events(done: Completion, req: p.ChatCompletionRequest) -> Iterator[ServerSentEvent]:
    """role chunk -> reasoning/content deltas -> tool-call deltas -> finish chunk -> usage -> [DONE]."""
    head = {"id": response_id("chatcmpl-", done.id), "created": done.created, "model": done.model}

    def chunk(delta: p.Delta, finish: str | None = None) -> ServerSentEvent:
        body = p.ChatCompletionChunk(**head, choices=[p.ChunkChoice(delta=delta, finish_reason=finish)])
        return ServerSentEvent(data=body.model_dump_json(exclude_none=True))

    yield chunk(p.Delta(role="assistant", content=""))
    for piece in chunk_text(done.reasoning, channel="reasoning"):
        yield chunk(p.Delta(reasoning_content=piece))
    for piece in chunk_text(done.text):
        yield chunk(p.Delta(content=piece))
    for index, call in enumerate(done.tool_calls):
        start = p.DeltaToolCall(
            index=index,
            id=call.id,
            type="function",
            function=p.DeltaFunctionCall(name=call.name, arguments=""),
        )
        yield chunk(p.Delta(tool_calls=[start]))
        for piece in chunk_text(call.arguments, channel=f"arguments{index}"):
            args = p.DeltaToolCall(index=index, function=p.DeltaFunctionCall(arguments=piece))
            yield chunk(p.Delta(tool_calls=[args]))
    yield chunk(p.Delta(), finish=done.finish_reason)
    if req.stream_options is not None and req.stream_options.include_usage:
        usage = p.ChatCompletionChunk(**head, choices=[], usage=_usage(done))
        yield ServerSentEvent(data=usage.model_dump_json(exclude_none=True))
    yield ServerSentEvent(data="[DONE]")


# ---- errors and probes -----------------------------------------------------------------------------


def error_body(err: OpenEnvError) -> tuple[int, BaseModel]:
    """The OpenAI error format (`_shared.openai_error_body`), which the Responses API shares."""
    return openai_error_body(err)


def models_body(models: list[str], ctx: RequestContext) -> p.ModelList:
    return p.ModelList(data=[p.ModelCard(id=m) for m in models])


class OpenAIChatDialect:
    """`POST /v1/chat/completions` and `GET /v1/models`."""

    name = NAME
    stream_style = StreamStyle()
    parse = staticmethod(parse)
    to_canonical = staticmethod(to_canonical)
    from_canonical = staticmethod(from_canonical)
    sse_events = staticmethod(sse_events)
    error_body = staticmethod(error_body)
    session_token = staticmethod(session_token)
    models_body = staticmethod(models_body)
