"""OpenAI Responses wire models: what Codex sends to `/v1/responses` and what it expects back.

Fields follow https://platform.openai.com/docs/api-reference/responses/create. Requests are lenient
(`extra="allow"`); unknown input items and built-in tools (`web_search`, `file_search`, ...) parse as
`OtherItem` / `OtherTool` so a new item kind is ignored rather than refused. Responses and SSE events
are ours, so they are strict.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag

__all__ = [
    "CallDeltaEvent",
    "ContentPartEvent",
    "CustomTool",
    "CustomToolCallDoneEvent",
    "CustomToolCallItem",
    "CustomToolCallOutputItem",
    "FunctionCallDoneEvent",
    "FunctionCallItem",
    "FunctionCallOutputItem",
    "FunctionTool",
    "IncompleteDetails",
    "InputItem",
    "InputText",
    "MessageItem",
    "NamespaceTool",
    "OtherItem",
    "OtherTool",
    "OutputCustomToolCall",
    "OutputFunctionCall",
    "OutputItem",
    "OutputItemEvent",
    "OutputMessage",
    "OutputReasoning",
    "OutputReasoningText",
    "OutputText",
    "ReasoningItem",
    "ReasoningText",
    "Response",
    "ResponseEvent",
    "ResponseUsage",
    "ResponsesRequest",
    "SummaryText",
    "TextDeltaEvent",
    "TextDoneEvent",
    "ToolChoiceNamed",
    "ToolSpec",
]


class _Request(BaseModel):
    """Harness input: unknown fields are kept (and ignored), never rejected."""

    model_config = ConfigDict(extra="allow")


class _Response(BaseModel):
    """Our output: a typo in a field name is a bug, so it fails loudly."""

    model_config = ConfigDict(extra="forbid")


def _kind(known: frozenset[str], fallback: str) -> Discriminator:
    """Discriminate on `type`, sending unknown types to `fallback`; a bare `{role, content}` is a message."""

    def pick(value: Any) -> str:
        kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
        if kind is None and isinstance(value, dict) and "role" in value:
            return "message"
        return kind if isinstance(kind, str) and kind in known else fallback

    return Discriminator(pick)


# --- input items -------------------------------------------------------------------------------


class InputText(_Request):
    """`input_text` (user/system/developer) or `output_text` (an echoed assistant message)."""

    type: Literal["input_text", "output_text", "refusal", "input_image", "input_file"]
    text: str = ""
    refusal: str | None = None


class MessageItem(_Request):
    type: Literal["message"] = "message"
    id: str | None = None
    role: Literal["user", "assistant", "system", "developer"]
    content: str | list[InputText]
    status: str | None = None


class FunctionCallItem(_Request):
    type: Literal["function_call"]
    id: str | None = None
    call_id: str
    name: str
    namespace: str | None = None
    arguments: str = ""
    status: str | None = None


class FunctionCallOutputItem(_Request):
    type: Literal["function_call_output"]
    id: str | None = None
    call_id: str
    output: str | list[InputText]
    status: str | None = None


class CustomToolCallItem(_Request):
    """A call to a freeform tool, e.g. Codex's `apply_patch` (lark grammar): `input` is raw text."""

    type: Literal["custom_tool_call"]
    id: str | None = None
    call_id: str
    name: str
    input: str = ""


class CustomToolCallOutputItem(_Request):
    type: Literal["custom_tool_call_output"]
    id: str | None = None
    call_id: str
    output: str | list[InputText]


class SummaryText(_Request):
    type: Literal["summary_text"] = "summary_text"
    text: str


class ReasoningText(_Request):
    type: Literal["reasoning_text"] = "reasoning_text"
    text: str


class ReasoningItem(_Request):
    type: Literal["reasoning"]
    id: str | None = None
    summary: list[SummaryText] = Field(default_factory=list)
    content: list[ReasoningText] | None = None
    encrypted_content: str | None = None


class OtherItem(_Request):
    """An item kind the proxy does not map (web_search_call, item_reference, ...): ignored."""

    type: str


_ITEM_TYPES = frozenset(
    [
        "message",
        "function_call",
        "function_call_output",
        "custom_tool_call",
        "custom_tool_call_output",
        "reasoning",
    ]
)

InputItem = Annotated[
    Annotated[MessageItem, Tag("message")]
    | Annotated[FunctionCallItem, Tag("function_call")]
    | Annotated[FunctionCallOutputItem, Tag("function_call_output")]
    | Annotated[CustomToolCallItem, Tag("custom_tool_call")]
    | Annotated[CustomToolCallOutputItem, Tag("custom_tool_call_output")]
    | Annotated[ReasoningItem, Tag("reasoning")]
    | Annotated[OtherItem, Tag("other")],
    _kind(_ITEM_TYPES, "other"),
]


# --- tools -------------------------------------------------------------------------------------


class FunctionTool(_Request):
    type: Literal["function"]
    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class CustomTool(_Request):
    """A freeform tool: the model answers with raw text, optionally constrained by `format` (a grammar)."""

    type: Literal["custom"]
    name: str
    description: str | None = None
    format: dict[str, Any] | None = None


class NamespaceTool(_Request):
    """Codex >= 0.17 groups tools (`multi_agent_v1`) as `{type: namespace, name, tools: [...]}`."""

    type: Literal["namespace"]
    name: str
    description: str | None = None
    tools: list[ToolSpec] = Field(default_factory=list)


class OtherTool(_Request):
    """A built-in tool (web_search, file_search, ...): accepted, never offered to the model."""

    type: str


ToolSpec = Annotated[
    Annotated[FunctionTool, Tag("function")]
    | Annotated[CustomTool, Tag("custom")]
    | Annotated[NamespaceTool, Tag("namespace")]
    | Annotated[OtherTool, Tag("other")],
    _kind(frozenset(["function", "custom", "namespace"]), "other"),
]
NamespaceTool.model_rebuild()


class ToolChoiceNamed(_Request):
    type: str
    name: str | None = None


class ResponsesRequest(_Request):
    """`POST /v1/responses`. Codex sends `store: false`, `include`, `prompt_cache_key` and
    `client_metadata`; they are accepted and do not change generation."""

    model: str
    input: str | list[InputItem] = Field(default_factory=list)
    include: list[str] | None = None
    instructions: str | None = None
    max_output_tokens: int | None = Field(default=None, ge=1)
    metadata: dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    previous_response_id: str | None = None
    reasoning: dict[str, Any] | None = None
    store: bool | None = None
    stream: bool = False
    temperature: float | None = Field(default=None, ge=0)
    text: dict[str, Any] | None = None
    tool_choice: Literal["auto", "none", "required"] | ToolChoiceNamed | None = None
    tools: list[ToolSpec] | None = None
    top_p: float | None = None
    truncation: str | None = None
    user: str | None = None


# --- response ----------------------------------------------------------------------------------


class OutputText(_Response):
    type: Literal["output_text"] = "output_text"
    text: str
    annotations: list[Any] = Field(default_factory=list)
    logprobs: list[Any] = Field(default_factory=list)


class OutputMessage(_Response):
    type: Literal["message"] = "message"
    id: str
    status: Literal["in_progress", "completed", "incomplete"] = "completed"
    role: Literal["assistant"] = "assistant"
    content: list[OutputText]


class OutputFunctionCall(_Response):
    type: Literal["function_call"] = "function_call"
    id: str
    call_id: str
    name: str
    namespace: str | None = None
    arguments: str
    status: Literal["in_progress", "completed", "incomplete"] = "completed"


class OutputCustomToolCall(_Response):
    type: Literal["custom_tool_call"] = "custom_tool_call"
    id: str
    call_id: str
    name: str
    input: str
    status: Literal["in_progress", "completed", "incomplete"] = "completed"


class OutputReasoningText(_Response):
    type: Literal["reasoning_text"] = "reasoning_text"
    text: str


class OutputReasoning(_Response):
    type: Literal["reasoning"] = "reasoning"
    id: str
    summary: list[Any] = Field(default_factory=list)
    content: list[OutputReasoningText]
    status: Literal["in_progress", "completed", "incomplete"] = "completed"


OutputItem = Annotated[
    OutputMessage | OutputFunctionCall | OutputCustomToolCall | OutputReasoning, Field(discriminator="type")
]


class _InputTokensDetails(_Response):
    cached_tokens: int = 0


class _OutputTokensDetails(_Response):
    reasoning_tokens: int = 0


class ResponseUsage(_Response):
    input_tokens: int
    input_tokens_details: _InputTokensDetails = Field(default_factory=_InputTokensDetails)
    output_tokens: int
    output_tokens_details: _OutputTokensDetails = Field(default_factory=_OutputTokensDetails)
    total_tokens: int


class IncompleteDetails(_Response):
    reason: Literal["max_output_tokens", "content_filter"]


class Response(_Response):
    """The response object (https://platform.openai.com/docs/api-reference/responses/object)."""

    id: str
    object: Literal["response"] = "response"
    created_at: int
    status: Literal["in_progress", "completed", "incomplete", "failed"]
    error: dict[str, Any] | None = None
    incomplete_details: IncompleteDetails | None = None
    instructions: str | None = None
    max_output_tokens: int | None = None
    model: str
    output: list[OutputItem] = Field(default_factory=list)
    parallel_tool_calls: bool = True
    previous_response_id: str | None = None
    reasoning: dict[str, Any] | None = None
    store: bool = False
    temperature: float | None = None
    text: dict[str, Any] = Field(default_factory=lambda: {"format": {"type": "text"}})
    tool_choice: Any = "auto"
    tools: list[Any] = Field(default_factory=list)
    top_p: float | None = None
    truncation: str = "disabled"
    usage: ResponseUsage | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


# --- SSE events (https://platform.openai.com/docs/api-reference/responses-streaming) -----------
# Every event carries its `type` and a `sequence_number`; the grammar (which events, in which order)
# lives in convert.py.


class _Event(_Response):
    sequence_number: int


class ResponseEvent(_Event):
    type: Literal["response.created", "response.in_progress", "response.completed", "response.incomplete"]
    response: Response


class OutputItemEvent(_Event):
    type: Literal["response.output_item.added", "response.output_item.done"]
    output_index: int
    item: OutputItem


class ContentPartEvent(_Event):
    type: Literal["response.content_part.added", "response.content_part.done"]
    item_id: str
    output_index: int
    content_index: int
    part: OutputText | OutputReasoningText


class TextDeltaEvent(_Event):
    """`output_text.delta` carries `logprobs` (always `[]` here); `reasoning_text.delta` does not."""

    type: Literal["response.output_text.delta", "response.reasoning_text.delta"]
    item_id: str
    output_index: int
    content_index: int
    delta: str
    logprobs: list[Any] | None = None


class TextDoneEvent(_Event):
    type: Literal["response.output_text.done", "response.reasoning_text.done"]
    item_id: str
    output_index: int
    content_index: int
    text: str
    logprobs: list[Any] | None = None


class CallDeltaEvent(_Event):
    type: Literal["response.function_call_arguments.delta", "response.custom_tool_call_input.delta"]
    item_id: str
    output_index: int
    delta: str


class FunctionCallDoneEvent(_Event):
    type: Literal["response.function_call_arguments.done"] = "response.function_call_arguments.done"
    item_id: str
    output_index: int
    name: str
    arguments: str


class CustomToolCallDoneEvent(_Event):
    type: Literal["response.custom_tool_call_input.done"] = "response.custom_tool_call_input.done"
    item_id: str
    output_index: int
    input: str
