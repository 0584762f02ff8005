"""Gemini generateContent <-> canonical: the pure mapping, the SSE grammar and the error format.

The model name and whether to stream come from the route (`/v1beta/models/{model}:streamGenerateContent`),
not the body, so `parse` wraps the body in a `GeminiCall` that carries both. Gemini function calls may
come without ids (Pi sends none): such calls get positional ids, and a `functionResponse` without an
id answers the oldest open call of the same name.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

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
from openenv.capture.dialects._shared import chunk_text, response_id
from openenv.capture.dialects.base import RequestContext, ServerSentEvent, StreamStyle
from openenv.capture.dialects.gemini import protocol as p
from openenv.capture.dialects.state import CacheSpec, DialectState
from openenv.errors import BackendUnavailable, CapacityError, OpenEnvError, Unsupported

__all__ = [
    "GeminiDialect",
    "count_tokens_body",
    "error_body",
    "from_canonical",
    "normalize_schema",
    "session_token",
    "sse_events",
    "to_canonical",
]

NAME = "gemini"


def session_token(ctx: RequestContext) -> str | None:
    """`x-goog-api-key` (Gemini CLI, google-genai) or `?key=` (REST samples)."""
    return ctx.headers.get("x-goog-api-key") or ctx.query.get("key") or None


# ---- request -> canonical ------------------------------------------------------------------------


def to_canonical(req: p.GeminiCall, state: DialectState) -> CanonicalRequest:
    body = req.body
    caches = state.caches(_SPEC)
    config = body.generation_config or p.GenerationConfig()
    if config.candidate_count is not None and config.candidate_count > 1:
        raise Unsupported(
            f"candidateCount={config.candidate_count} is not supported; the proxy samples one "
            "candidate per request",
            param="generationConfig.candidateCount",
        )
    return CanonicalRequest(
        model=req.model,
        messages=_system(body.system_instruction, caches.values) + caches.history.convert(body.contents),
        sampling=_sampling(config),
        tools=_tools(body.tools),
        tool_choice=_tool_choice(body.tool_config),
        stream=req.stream,
    )


def _system(instruction: p.Content | None, values: ValueMemo) -> tuple[Message, ...]:
    """The system message, the same object every turn (the session compares history by identity)."""
    texts = tuple(x.text for x in (instruction.parts if instruction else []) if x.text)
    return values.get(("system", texts), lambda: _system_message(texts))


def _system_message(texts: tuple[str, ...]) -> tuple[Message, ...]:
    return (Message(role="system", parts=tuple(TextPart(text=t) for t in texts)),) if texts else ()


@dataclass(frozen=True, slots=True)
class _CallIds:
    """Gives id-less function calls stable positional ids and pairs id-less responses with them.
    Never changed in place (`HistoryMemo` shares it): each step returns the next state."""

    count: int = 0
    open: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # name -> unanswered call ids

    def call(self, fc: p.FunctionCall) -> tuple[_CallIds, str]:
        call_id = fc.id or f"call_{fc.name}_{self.count}"
        return _CallIds(
            self.count + 1, {**self.open, fc.name: (*self.open.get(fc.name, ()), call_id)}
        ), call_id

    def response(self, fr: p.FunctionResponse) -> tuple[_CallIds, str]:
        pending = self.open.get(fr.name, ())
        if fr.id:
            if fr.id not in pending:
                return self, fr.id
            i = pending.index(fr.id)
            return self._answered(fr.name, pending[:i] + pending[i + 1 :]), fr.id
        if pending:
            return self._answered(fr.name, pending[1:]), pending[0]
        return self, f"call_{fr.name}_unmatched"

    def _answered(self, name: str, pending: tuple[str, ...]) -> _CallIds:
        return _CallIds(self.count, {**self.open, name: pending})


def _fold(
    items: ItemMemo[Any], values: ValueMemo, ids: _CallIds, content: p.Content
) -> tuple[_CallIds, list[Message]]:
    """One content's canonical messages, and the call ids after it (`DialectState` continues resent
    contents from the converted list they extend, so a turn converts its new contents)."""
    if content.role != "model":
        return _user_messages(content.parts, ids)
    parts: list[Part] = []
    for x in content.parts:
        if _has_model_part(x):
            ids, part = _model_part(x, ids)
            parts.append(part)
    return ids, [Message(role="assistant", parts=_joined(parts))]


_SPEC: CacheSpec[p.GenerateContentRequest, _CallIds, Message] = CacheSpec(
    NAME, p.GenerateContentRequest, ("contents", "tools"), _fold, _CallIds()
)


def _has_model_part(part: p.Part) -> bool:
    return part.function_call is not None or bool(part.text)


def _model_part(part: p.Part, ids: _CallIds) -> tuple[_CallIds, Part]:
    if part.function_call is not None:
        fc = part.function_call
        ids, call_id = ids.call(fc)
        return ids, ToolCallPart(id=call_id, name=fc.name, arguments=json.dumps(fc.args, ensure_ascii=False))
    if part.thought:
        return ids, ThinkingPart(text=part.text or "", signature=part.thought_signature)
    return ids, TextPart(text=part.text or "")


def _joined(parts: list[Part]) -> tuple[Part, ...]:
    """Adjacent text (or thought) parts as one: a streamed reply arrives, and is echoed back, as one
    part per chunk, but it is one piece of text (and one canonical part) however it was chunked."""
    out: list[Part] = []
    for part in parts:
        last = out[-1] if out else None
        if isinstance(part, TextPart) and isinstance(last, TextPart):
            out[-1] = TextPart(text=last.text + part.text)
        elif isinstance(part, ThinkingPart) and isinstance(last, ThinkingPart):
            out[-1] = ThinkingPart(text=last.text + part.text, signature=last.signature or part.signature)
        else:
            out.append(part)
    return tuple(out)


def _user_messages(parts: list[p.Part], ids: _CallIds) -> tuple[_CallIds, list[Message]]:
    """Text parts become user messages; each functionResponse its own `tool` message, in order."""
    out: list[Message] = []
    texts: list[Part] = []
    for part in parts:
        if part.function_response is not None:
            if texts:
                out.append(Message(role="user", parts=tuple(texts)))
                texts = []
            ids, result = _tool_result(part.function_response, ids)
            out.append(Message(role="tool", parts=(result,)))
        elif part.text is not None:
            texts.append(TextPart(text=part.text))
        elif part.inline_data is not None or part.file_data is not None:
            raise Unsupported(
                "inlineData and fileData parts are not supported; send text parts", param="contents"
            )
    if texts:
        out.append(Message(role="user", parts=tuple(texts)))
    return ids, out


def _tool_result(fr: p.FunctionResponse, ids: _CallIds) -> tuple[_CallIds, ToolResultPart]:
    """`{output: "..."}` (Gemini CLI, Pi) or `{error: "..."}` unwrap to their text; else the JSON."""
    response = fr.response
    if set(response) == {"output"} and isinstance(response["output"], str):
        content, is_error = response["output"], False
    elif set(response) == {"error"} and isinstance(response["error"], str):
        content, is_error = response["error"], True
    else:
        content, is_error = json.dumps(response, ensure_ascii=False), False
    ids, call_id = ids.response(fr)
    return ids, ToolResultPart(tool_call_id=call_id, content=content, name=fr.name, is_error=is_error)


def _sampling(config: p.GenerationConfig) -> SamplingParams:
    return SamplingParams(
        max_tokens=config.max_output_tokens,
        temperature=config.temperature,
        top_p=config.top_p,
        top_k=int(config.top_k) if config.top_k is not None else None,
        presence_penalty=config.presence_penalty,
        frequency_penalty=config.frequency_penalty,
        seed=config.seed,
        stop=tuple(config.stop_sequences or ()),
        json_schema=_json_schema(config),
    )


def _json_schema(config: p.GenerationConfig) -> dict[str, Any] | None:
    """The schema a JSON reply must follow. Gemini CLI's router sends `responseJsonSchema` in
    Google's upper-case type spelling and retries five times when the reply does not parse."""
    schema = config.response_json_schema or config.response_schema
    if config.response_mime_type != "application/json" or not schema:
        return None
    return normalize_schema(schema)


def _tools(tools: list[p.Tool] | None) -> tuple[Tool, ...]:
    """Function declarations; built-ins (googleSearch, codeExecution, ...) are not offered."""
    out = []
    for decl in (d for tool in tools or [] for d in tool.function_declarations or []):
        schema = decl.parameters_json_schema or normalize_schema(decl.parameters or {})
        out.append(
            Tool(
                name=decl.name,
                description=decl.description or "",
                parameters=schema or {"type": "object", "properties": {}},
            )
        )
    return tuple(out)


def normalize_schema(schema: Any) -> Any:
    """Google's OpenAPI-subset `Schema` (`type: "OBJECT"`) as JSON Schema (`type: "object"`)."""
    if isinstance(schema, list):
        return [normalize_schema(x) for x in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: normalize_schema(v) for k, v in schema.items()}
    if isinstance(out.get("type"), str):
        out["type"] = out["type"].lower()
    return out


def _tool_choice(config: p.ToolConfig | None) -> ToolChoice:
    fcc = config.function_calling_config if config else None
    match fcc.mode if fcc else None:
        case None | "AUTO" | "MODE_UNSPECIFIED" | "VALIDATED":
            return ToolChoice()
        case "NONE":
            return ToolChoice(mode="none")
        case "ANY":
            names = fcc.allowed_function_names or [] if fcc is not None else []
            return ToolChoice(mode="named", name=names[0]) if len(names) == 1 else ToolChoice(mode="required")
    raise AssertionError(fcc)


# ---- completion -> reply -------------------------------------------------------------------------

_FINISH: dict[str, p.FinishReason] = {"stop": "STOP", "tool_calls": "STOP", "length": "MAX_TOKENS"}


def _parts(done: Completion) -> list[p.ResponsePart]:
    """thought, then text, then one functionCall part per call (never empty: Gemini CLI retries an
    empty candidate)."""
    parts: list[p.ResponsePart] = []
    if done.reasoning:
        parts.append(p.ResponsePart(text=done.reasoning, thought=True))
    if done.text or not done.tool_calls:
        parts.append(p.ResponsePart(text=done.text))
    for call in done.tool_calls:
        fc = p.ResponseFunctionCall(id=call.id, name=call.name, args=call.parsed_arguments())
        parts.append(p.ResponsePart(function_call=fc))
    return parts


def _usage(done: Completion) -> p.UsageMetadata:
    u = done.usage
    return p.UsageMetadata(
        prompt_token_count=u.prompt_tokens,
        candidates_token_count=u.completion_tokens,
        total_token_count=u.total_tokens,
    )


def _reply(done: Completion, parts: list[p.ResponsePart], *, last: bool) -> p.GenerateContentResponse:
    candidate = p.Candidate(
        content=p.ResponseContent(parts=parts), finish_reason=_FINISH[done.finish_reason] if last else None
    )
    return p.GenerateContentResponse(
        candidates=[candidate],
        usage_metadata=_usage(done) if last else None,
        model_version=done.model,
        response_id=response_id("", done.id),
    )


def from_canonical(done: Completion, req: p.GeminiCall) -> p.GenerateContentResponse:
    return _reply(done, _parts(done), last=True)


def sse_events(done: Completion, req: p.GeminiCall) -> Iterator[ServerSentEvent]:
    """`data:` chunks (no event names): thought text, then text, then the function calls in one chunk;
    the last chunk carries `finishReason` and `usageMetadata`."""
    chunks: list[list[p.ResponsePart]] = []
    for part in _parts(done):
        if part.function_call is not None:
            if chunks and chunks[-1][0].function_call is not None:
                chunks[-1].append(part)
            else:
                chunks.append([part])
            continue
        pieces = list(chunk_text(part.text or "", channel="reasoning" if part.thought else "text")) or [""]
        chunks.extend([part.model_copy(update={"text": piece})] for piece in pieces)
    for index, parts in enumerate(chunks):
        reply = _reply(done, parts, last=index == len(chunks) - 1)
        yield ServerSentEvent(data=reply.model_dump_json(exclude_none=True))


# ---- errors and token counting ---------------------------------------------------------------------

_STATUS: dict[int, p.GoogleStatus] = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


def error_body(err: OpenEnvError) -> tuple[int, BaseModel]:
    """Google error JSON. A backend outage or full server is 503 `UNAVAILABLE`, which Gemini CLI
    and google-genai retry."""
    status = 503 if isinstance(err, BackendUnavailable | CapacityError) else err.status_code
    kind = _STATUS.get(status, "INTERNAL" if status >= 500 else "INVALID_ARGUMENT")
    return status, p.GeminiErrorBody(error=p.GeminiErrorDetail(code=status, message=err.message, status=kind))


def count_tokens_body(n_tokens: int, req: p.GeminiCall) -> p.CountTokensResponse:
    return p.CountTokensResponse(total_tokens=n_tokens)


class GeminiDialect:
    """`:generateContent` (stream=False), `:streamGenerateContent` (stream=True) and `:countTokens`."""

    name = NAME
    stream_style = StreamStyle(holds_last=True)  # the last chunk carries the finish reason and usage

    def __init__(self, *, stream: bool = False) -> None:
        self.stream = stream

    def parse(self, body: bytes, ctx: RequestContext, state: DialectState) -> p.GeminiCall:
        model = ctx.path_params.get("model", "")
        return p.GeminiCall(model=model, stream=self.stream, body=state.caches(_SPEC).body.parse(body))

    to_canonical = staticmethod(to_canonical)
    from_canonical = staticmethod(from_canonical)
    sse_events = staticmethod(sse_events)
    error_body = staticmethod(error_body)
    session_token = staticmethod(session_token)
    count_tokens_body = staticmethod(count_tokens_body)
