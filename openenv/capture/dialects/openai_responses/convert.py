"""OpenAI Responses <-> canonical: the pure mapping, the SSE grammar and the error format.

Freeform (`custom`) tools such as Codex's `apply_patch` have no JSON arguments. They are offered to
the model as a function with one string parameter, `input`, and the model's `{"input": ...}` call is
turned back into a `custom_tool_call` whose `input` is that raw text.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, assert_never

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
    openai_error_body,
    response_id,
)
from openenv.capture.dialects.base import RequestContext, ServerSentEvent, StreamStyle
from openenv.capture.dialects.openai_responses import protocol as p
from openenv.capture.dialects.state import CacheSpec, DialectCaches, DialectState
from openenv.errors import OpenEnvError, Unsupported

__all__ = [
    "OpenAIResponsesDialect",
    "error_body",
    "from_canonical",
    "parse",
    "session_token",
    "sse_events",
    "to_canonical",
]

NAME = "openai_responses"
CUSTOM_INPUT = "input"  # the one parameter a freeform tool is offered with

log = logging.getLogger(__name__)


def parse(body: bytes, ctx: RequestContext, state: DialectState) -> p.ResponsesRequest:
    return state.caches(_SPEC).body.parse(body)


def session_token(ctx: RequestContext) -> str | None:
    return bearer_token(ctx.headers, "api-key")


# ---- request -> canonical ------------------------------------------------------------------------


def to_canonical(req: p.ResponsesRequest, state: DialectState) -> CanonicalRequest:
    if req.previous_response_id:
        raise Unsupported(
            "previous_response_id is not supported: the proxy stores no responses; send the whole "
            "conversation in `input` (as Codex does with store: false)",
            param="previous_response_id",
        )
    caches = state.caches(_SPEC)
    return CanonicalRequest(
        model=req.model,
        messages=_instructions(req.instructions, caches.values) + _messages(req.input, caches),
        sampling=SamplingParams(
            max_tokens=req.max_output_tokens,
            temperature=req.temperature,
            top_p=req.top_p,
            json_schema=json_schema_format(req.text),
        ),
        tools=_tools(req.tools),
        tool_choice=_tool_choice(req.tool_choice),
        stream=req.stream,
    )


def _instructions(instructions: str | None, values: ValueMemo) -> tuple[Message, ...]:
    """The system message, the same object every turn (the session compares history by identity)."""
    if not instructions:
        return ()
    return values.get(
        ("system", instructions), lambda: (Message(role="system", parts=(TextPart(text=instructions),)),)
    )


@dataclass(frozen=True, slots=True)
class _Fold:
    """The state between input items: consecutive assistant-side items (reasoning, an assistant
    message, calls) form one assistant turn, as they came from one response; `names` maps call ids
    to tool names for the results. Never changed in place (`HistoryMemo` shares it)."""

    turn: tuple[Part, ...] = ()
    names: Mapping[str, str] = field(default_factory=dict)

    def assistant(self, part: Part) -> _Fold:
        names = {**self.names, part.id: part.name} if isinstance(part, ToolCallPart) else self.names
        return _Fold((*self.turn, part), names)

    def add(self, message: Message) -> tuple[_Fold, tuple[Message, ...]]:
        return _Fold((), self.names), (*self.closed(), message)

    def result(self, call_id: str, output: str | list[p.InputText]) -> tuple[_Fold, tuple[Message, ...]]:
        part = ToolResultPart(tool_call_id=call_id, content=_text(output), name=self.names.get(call_id))
        return self.add(Message(role="tool", parts=(part,)))

    def closed(self) -> tuple[Message, ...]:
        return (Message(role="assistant", parts=self.turn),) if self.turn else ()


def _fold(
    items: ItemMemo[Any], values: ValueMemo, state: _Fold, item: p.InputItem
) -> tuple[_Fold, tuple[Message, ...]]:
    """One input item's canonical messages (`DialectState` continues a resent input list from the
    converted list it extends, so a turn converts its new items)."""
    match item:
        case p.MessageItem(role="assistant"):
            text = _text(item.content)
            return (state.assistant(TextPart(text=text)) if text else state), ()
        case p.MessageItem(role=role):
            text = _text(item.content)
            kind = "user" if role == "user" else "system"
            return state.add(Message(role=kind, parts=(TextPart(text=text),) if text else ()))
        case p.FunctionCallItem():
            return state.assistant(
                ToolCallPart(id=item.call_id, name=item.name, arguments=item.arguments)
            ), ()
        case p.CustomToolCallItem():
            args = json.dumps({CUSTOM_INPUT: item.input}, ensure_ascii=False)
            return state.assistant(ToolCallPart(id=item.call_id, name=item.name, arguments=args)), ()
        case p.FunctionCallOutputItem() | p.CustomToolCallOutputItem():
            return state.result(item.call_id, item.output)
        case p.ReasoningItem():
            return state.assistant(_thinking(item)), ()
        case p.OtherItem():
            log.info("ignoring %r input item (not mapped to the canonical history)", item.type)
            return state, ()
        case _:
            assert_never(item)


_SPEC: CacheSpec[p.ResponsesRequest, _Fold, Message] = CacheSpec(
    NAME, p.ResponsesRequest, ("input", "tools"), _fold, _Fold(), _Fold.closed
)


def _messages(
    items: str | list[p.InputItem], caches: DialectCaches[Any, _Fold, Message]
) -> tuple[Message, ...]:
    if isinstance(items, str):
        return (Message(role="user", parts=(TextPart(text=items),)),)
    return caches.history.convert(items)


def _text(content: str | list[p.InputText]) -> str:
    if isinstance(content, str):
        return content
    if any(c.type in ("input_image", "input_file") for c in content):
        raise Unsupported(
            "input_image and input_file parts are not supported; send text parts", param="input"
        )
    return "".join(c.text or c.refusal or "" for c in content)


def _thinking(item: p.ReasoningItem) -> ThinkingPart:
    """Reasoning text if present, else the summary (the only text a stored OpenAI reasoning has)."""
    pieces = [c.text for c in item.content or []] or [s.text for s in item.summary]
    return ThinkingPart(text="\n".join(pieces), signature=item.encrypted_content)


def _tools(tools: list[p.ToolSpec] | None) -> tuple[Tool, ...]:
    """function and custom tools, namespaces flattened; built-ins (web_search, ...) are not offered."""
    out: list[Tool] = []
    for tool in tools or []:
        match tool:
            case p.FunctionTool():
                schema = tool.parameters or {"type": "object", "properties": {}}
                out.append(Tool(name=tool.name, description=tool.description or "", parameters=schema))
            case p.CustomTool():
                out.append(_custom_tool(tool))
            case p.NamespaceTool():
                out.extend(_tools(tool.tools))
            case p.OtherTool():
                log.info("not offering built-in tool %r to the model", tool.type)
            case _:
                assert_never(tool)
    return tuple(out)


def _custom_tool(tool: p.CustomTool) -> Tool:
    fmt = tool.format or {}
    hint = (
        f" The input must follow this {fmt.get('syntax')} grammar:\n{fmt['definition']}"
        if fmt.get("type") == "grammar" and fmt.get("definition")
        else ""
    )
    schema = {
        "type": "object",
        "required": [CUSTOM_INPUT],
        "properties": {
            CUSTOM_INPUT: {"type": "string", "description": f"The raw freeform input of {tool.name}.{hint}"}
        },
    }
    return Tool(name=tool.name, description=tool.description or "", parameters=schema)


def _tool_choice(choice: str | p.ToolChoiceNamed | None) -> ToolChoice:
    if choice is None:
        return ToolChoice()
    if isinstance(choice, p.ToolChoiceNamed):
        if choice.name and choice.type in ("function", "custom"):
            return ToolChoice(mode="named", name=choice.name)
        return ToolChoice()  # allowed_tools, built-in tool types: leave the choice to the model
    return ToolChoice(mode=choice)  # type: ignore[arg-type]  # the remaining wire values are ToolChoice's own mode names


# ---- completion -> reply -------------------------------------------------------------------------


@dataclass(frozen=True)
class _Kinds:
    """What the request declared about tool names: which are freeform, which sit in a namespace."""

    custom: frozenset[str]
    namespace: dict[str, str]

    @classmethod
    def of(cls, tools: list[p.ToolSpec] | None) -> _Kinds:
        custom: set[str] = set()
        namespace: dict[str, str] = {}
        for tool in tools or []:
            if isinstance(tool, p.CustomTool):
                custom.add(tool.name)
            elif isinstance(tool, p.NamespaceTool):
                namespace.update({t.name: tool.name for t in tool.tools if hasattr(t, "name")})
        return cls(frozenset(custom), namespace)


def _output(done: Completion, req: p.ResponsesRequest) -> list[p.OutputItem]:
    """reasoning, then the assistant message, then one call item per tool call."""
    items: list[p.OutputItem] = []
    if done.reasoning:
        text = p.OutputReasoningText(text=done.reasoning)
        items.append(p.OutputReasoning(id=response_id("rs_", done.id), content=[text]))
    if done.text or not done.tool_calls:
        items.append(p.OutputMessage(id=response_id("msg_", done.id), content=[p.OutputText(text=done.text)]))
    kinds = _Kinds.of(req.tools)
    for index, call in enumerate(done.tool_calls):
        item_id = response_id("fc_", f"{done.id}_{index}")
        if call.name in kinds.custom:
            raw = call.parsed_arguments().get(CUSTOM_INPUT)
            items.append(
                p.OutputCustomToolCall(
                    id=item_id,
                    call_id=call.id,
                    name=call.name,
                    input=raw if isinstance(raw, str) else call.arguments,
                )
            )
        else:
            items.append(
                p.OutputFunctionCall(
                    id=item_id,
                    call_id=call.id,
                    name=call.name,
                    namespace=kinds.namespace.get(call.name),
                    arguments=call.arguments,
                )
            )
    return items


def from_canonical(done: Completion, req: p.ResponsesRequest) -> p.Response:
    u = done.usage
    incomplete = done.finish_reason == "length"
    return p.Response(
        id=response_id("resp_", done.id),
        created_at=done.created,
        status="incomplete" if incomplete else "completed",
        incomplete_details=p.IncompleteDetails(reason="max_output_tokens") if incomplete else None,
        instructions=req.instructions,
        max_output_tokens=req.max_output_tokens,
        model=done.model,
        output=_output(done, req),
        parallel_tool_calls=req.parallel_tool_calls if req.parallel_tool_calls is not None else True,
        previous_response_id=req.previous_response_id,
        reasoning=req.reasoning,
        store=bool(req.store),
        temperature=req.temperature,
        top_p=req.top_p,
        usage=p.ResponseUsage(
            input_tokens=u.prompt_tokens, output_tokens=u.completion_tokens, total_tokens=u.total_tokens
        ),
        metadata=req.metadata or {},
    )


def sse_events(done: Completion, req: p.ResponsesRequest) -> Iterator[ServerSentEvent]:
    """created -> in_progress -> per item: added, its deltas and dones, item done -> completed."""
    final = from_canonical(done, req)
    start = final.model_copy(
        update={"status": "in_progress", "output": [], "usage": None, "incomplete_details": None}
    )
    seq = iter(range(1_000_000))
    yield _event(p.ResponseEvent(type="response.created", response=start, sequence_number=next(seq)))
    yield _event(p.ResponseEvent(type="response.in_progress", response=start, sequence_number=next(seq)))
    for index, item in enumerate(final.output):
        yield from _item_events(index, item, seq)
    last = "response.incomplete" if final.status == "incomplete" else "response.completed"
    yield _event(p.ResponseEvent(type=last, response=final, sequence_number=next(seq)))


def _item_events(index: int, item: p.OutputItem, seq: Iterator[int]) -> Iterator[ServerSentEvent]:
    match item:
        case p.OutputMessage() | p.OutputReasoning():
            empty = item.model_copy(update={"status": "in_progress", "content": []})
            body = _content_events(index, item, seq)
        case p.OutputFunctionCall():
            empty = item.model_copy(update={"status": "in_progress", "arguments": ""})
            body = _call_events(index, item, seq, item.arguments)
        case p.OutputCustomToolCall():
            empty = item.model_copy(update={"status": "in_progress", "input": ""})
            body = _call_events(index, item, seq, item.input)
        case _:
            assert_never(item)
    yield _event(
        p.OutputItemEvent(
            type="response.output_item.added", output_index=index, item=empty, sequence_number=next(seq)
        )
    )
    yield from body
    yield _event(
        p.OutputItemEvent(
            type="response.output_item.done", output_index=index, item=item, sequence_number=next(seq)
        )
    )


def _content_events(
    index: int, item: p.OutputMessage | p.OutputReasoning, seq: Iterator[int]
) -> Iterator[ServerSentEvent]:
    kind, logprobs = ("output_text", []) if isinstance(item, p.OutputMessage) else ("reasoning_text", None)
    where = {"item_id": item.id, "output_index": index, "content_index": 0}
    for part in item.content:
        empty = part.model_copy(update={"text": ""})
        yield _event(
            p.ContentPartEvent(
                type="response.content_part.added", part=empty, **where, sequence_number=next(seq)
            )
        )
        for piece in chunk_text(part.text, channel="text" if kind == "output_text" else "reasoning"):
            yield _event(
                p.TextDeltaEvent(
                    type=f"response.{kind}.delta",
                    delta=piece,
                    logprobs=logprobs,
                    **where,
                    sequence_number=next(seq),
                )
            )
        yield _event(
            p.TextDoneEvent(
                type=f"response.{kind}.done",
                text=part.text,
                logprobs=logprobs,
                **where,
                sequence_number=next(seq),
            )
        )
        yield _event(
            p.ContentPartEvent(
                type="response.content_part.done", part=part, **where, sequence_number=next(seq)
            )
        )


def _call_events(
    index: int, item: p.OutputFunctionCall | p.OutputCustomToolCall, seq: Iterator[int], text: str
) -> Iterator[ServerSentEvent]:
    custom = isinstance(item, p.OutputCustomToolCall)
    kind = "response.custom_tool_call_input.delta" if custom else "response.function_call_arguments.delta"
    for piece in chunk_text(text, channel=f"arguments{index}"):
        yield _event(
            p.CallDeltaEvent(
                type=kind, item_id=item.id, output_index=index, delta=piece, sequence_number=next(seq)
            )
        )
    if custom:
        yield _event(
            p.CustomToolCallDoneEvent(
                item_id=item.id, output_index=index, input=text, sequence_number=next(seq)
            )
        )
    else:
        yield _event(
            p.FunctionCallDoneEvent(
                item_id=item.id, output_index=index, name=item.name, arguments=text, sequence_number=next(seq)
            )
        )


def error_body(err: OpenEnvError) -> tuple[int, BaseModel]:
    """The OpenAI error format (`_shared.openai_error_body`), the same as Chat Completions'."""
    return openai_error_body(err)


def _event(model: BaseModel) -> ServerSentEvent:
    event_type: str = model.type  # type: ignore[attr-defined]  # every event model declares a `type` Literal; BaseModel does not
    return ServerSentEvent(event=event_type, data=model.model_dump_json(exclude_none=True))


class OpenAIResponsesDialect:
    """`POST /v1/responses`."""

    name = NAME
    stream_style = StreamStyle()
    parse = staticmethod(parse)
    to_canonical = staticmethod(to_canonical)
    from_canonical = staticmethod(from_canonical)
    sse_events = staticmethod(sse_events)
    error_body = staticmethod(error_body)
    session_token = staticmethod(session_token)
