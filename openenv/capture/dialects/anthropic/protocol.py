"""Anthropic Messages wire models: what Claude Code sends to `/v1/messages` and what it expects back.

Fields follow the order of https://docs.anthropic.com/en/api/messages. Requests are lenient
(`extra="allow"`): Claude Code adds beta fields every release, and a field we do not use must not
turn into a 400. Responses and SSE events are ours, so they are strict.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = [
    "BILLING_HEADER",
    "AnthropicErrorBody",
    "AnthropicErrorDetail",
    "AnthropicErrorType",
    "Base64ImageSource",
    "ContentBlockDeltaEvent",
    "ContentBlockStartEvent",
    "ContentBlockStopEvent",
    "CountTokensResponse",
    "ImageBlock",
    "InputJSONDelta",
    "Message",
    "MessageDelta",
    "MessageDeltaEvent",
    "MessageDeltaUsage",
    "MessageStartEvent",
    "MessageStopEvent",
    "MessagesRequest",
    "MessagesResponse",
    "PingEvent",
    "RedactedThinkingBlock",
    "RequestBlock",
    "ResponseBlock",
    "ResponseTextBlock",
    "ResponseThinkingBlock",
    "ResponseToolUseBlock",
    "SignatureDelta",
    "StopReason",
    "TextBlock",
    "TextDelta",
    "ThinkingBlock",
    "ThinkingDelta",
    "Tool",
    "ToolChoice",
    "ToolResultBlock",
    "ToolUseBlock",
    "Usage",
]


class _Request(BaseModel):
    """Harness input: unknown fields are kept (and ignored), never rejected."""

    model_config = ConfigDict(extra="allow")


class _Response(BaseModel):
    """Our output: a typo in a field name is a bug, so it fails loudly."""

    model_config = ConfigDict(extra="forbid")


# --- content blocks (request side) -------------------------------------------------------------


class TextBlock(_Request):
    type: Literal["text"] = "text"
    text: str
    cache_control: dict[str, Any] | None = None


class Base64ImageSource(_Request):
    type: str
    media_type: str | None = None
    data: str | None = None
    url: str | None = None


class ImageBlock(_Request):
    type: Literal["image"]
    source: Base64ImageSource


class ToolUseBlock(_Request):
    type: Literal["tool_use"] = "tool_use"
    id: str
    name: str
    input: dict[str, Any] = Field(default_factory=dict)


class ToolResultBlock(_Request):
    type: Literal["tool_result"]
    tool_use_id: str
    content: str | list[TextBlock | ImageBlock] | None = None
    is_error: bool = False


class ThinkingBlock(_Request):
    type: Literal["thinking"] = "thinking"
    thinking: str
    signature: str = ""


class RedactedThinkingBlock(_Request):
    type: Literal["redacted_thinking"]
    data: str


RequestBlock = Annotated[
    TextBlock | ImageBlock | ToolUseBlock | ToolResultBlock | ThinkingBlock | RedactedThinkingBlock,
    Field(discriminator="type"),
]


class Message(_Request):
    """One turn. `system` is allowed here: Claude Code >= 2.1 sends an environment block as a
    `role: "system"` message inside `messages` (the `per-turn-control-2026-07-01` beta)."""

    role: Literal["user", "assistant", "system"]
    content: str | list[RequestBlock]


class Tool(_Request):
    """A client tool (`input_schema`) or a server tool (`type` like `web_search_20250305`).

    Server tools and `defer_loading` tools are accepted and not offered to the model: the proxy
    cannot run a server tool, and Claude Code loads deferred tools later through ToolSearch.
    """

    type: str | None = None
    name: str
    description: str | None = None
    input_schema: dict[str, Any] | None = None
    cache_control: dict[str, Any] | None = None
    defer_loading: bool | None = None
    strict: bool | None = None

    @property
    def offered(self) -> bool:
        return self.input_schema is not None and self.type in (None, "custom") and not self.defer_loading


class ToolChoice(_Request):
    type: Literal["auto", "any", "tool", "none"]
    name: str | None = None
    disable_parallel_tool_use: bool | None = None

    @model_validator(mode="after")
    def _tool_needs_a_name(self) -> ToolChoice:
        if self.type == "tool" and not self.name:
            raise ValueError('tool_choice {type: "tool"} needs the name of the tool to call')
        return self


BILLING_HEADER = "x-anthropic-billing-header:"


class MessagesRequest(_Request):
    """`POST /v1/messages` (and `/v1/messages/count_tokens`, which sends no `max_tokens`).

    Claude Code also sends `thinking: {type: adaptive}`, `context_management`,
    `output_config` and `metadata.user_id`; they are accepted and do not change generation."""

    model: str
    messages: list[Message]
    max_tokens: int = Field(default=4096, ge=1)
    container: Any = None
    context_management: dict[str, Any] | None = None
    mcp_servers: list[dict[str, Any]] | None = None
    metadata: dict[str, Any] | None = None
    output_config: dict[str, Any] | None = None
    service_tier: str | None = None
    stop_sequences: list[str] | None = None
    stream: bool = False
    system: str | list[TextBlock] | None = None
    temperature: float | None = Field(default=None, ge=0)
    thinking: dict[str, Any] | None = None
    tool_choice: ToolChoice | None = None
    tools: list[Tool] | None = None
    top_k: int | None = None
    top_p: float | None = None

    @field_validator("system")
    @classmethod
    def _normalize_billing_header(cls, system: str | list[TextBlock] | None) -> str | list[TextBlock] | None:
        """Claude Code >= 2.1 puts an `x-anthropic-billing-header: cc_version=...; cch=...;` line first in
        the system prompt. It is billing metadata, not instructions, and may change per request, which
        would break prefix reuse between turns, so it is dropped."""
        if isinstance(system, str):
            first, _, rest = system.partition("\n")
            return rest if first.startswith(BILLING_HEADER) else system
        if system is not None:
            return [b for b in system if not b.text.startswith(BILLING_HEADER)]
        return system

    @field_validator("messages")
    @classmethod
    def _not_empty(cls, messages: list[Message]) -> list[Message]:
        if not messages:
            raise ValueError("messages must hold at least one message")
        return messages


class CountTokensResponse(_Response):
    input_tokens: int


# --- response ----------------------------------------------------------------------------------


class Usage(_Response):
    input_tokens: int
    output_tokens: int
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0


class ResponseTextBlock(_Response):
    type: Literal["text"] = "text"
    text: str


class ResponseToolUseBlock(_Response):
    type: Literal["tool_use"] = "tool_use"
    id: str
    name: str
    input: dict[str, Any]


class ResponseThinkingBlock(_Response):
    type: Literal["thinking"] = "thinking"
    thinking: str
    signature: str = ""


ResponseBlock = Annotated[
    ResponseTextBlock | ResponseToolUseBlock | ResponseThinkingBlock, Field(discriminator="type")
]

StopReason = Literal["end_turn", "max_tokens", "stop_sequence", "tool_use"]


class MessagesResponse(_Response):
    id: str
    type: Literal["message"] = "message"
    role: Literal["assistant"] = "assistant"
    content: list[ResponseBlock]
    model: str
    stop_reason: StopReason | None
    stop_sequence: str | None = None
    usage: Usage


# --- SSE events (https://docs.anthropic.com/en/docs/build-with-claude/streaming) ---------------


class MessageStartEvent(_Response):
    type: Literal["message_start"] = "message_start"
    message: MessagesResponse


class ContentBlockStartEvent(_Response):
    type: Literal["content_block_start"] = "content_block_start"
    index: int
    content_block: ResponseBlock


class TextDelta(_Response):
    type: Literal["text_delta"] = "text_delta"
    text: str


class InputJSONDelta(_Response):
    type: Literal["input_json_delta"] = "input_json_delta"
    partial_json: str


class ThinkingDelta(_Response):
    type: Literal["thinking_delta"] = "thinking_delta"
    thinking: str


class SignatureDelta(_Response):
    type: Literal["signature_delta"] = "signature_delta"
    signature: str


class ContentBlockDeltaEvent(_Response):
    type: Literal["content_block_delta"] = "content_block_delta"
    index: int
    delta: Annotated[TextDelta | InputJSONDelta | ThinkingDelta | SignatureDelta, Field(discriminator="type")]


class ContentBlockStopEvent(_Response):
    type: Literal["content_block_stop"] = "content_block_stop"
    index: int


class MessageDelta(_Response):
    stop_reason: StopReason | None
    stop_sequence: str | None = None


class MessageDeltaUsage(_Response):
    output_tokens: int
    input_tokens: int | None = None


class MessageDeltaEvent(_Response):
    type: Literal["message_delta"] = "message_delta"
    delta: MessageDelta
    usage: MessageDeltaUsage


class MessageStopEvent(_Response):
    type: Literal["message_stop"] = "message_stop"


class PingEvent(_Response):
    type: Literal["ping"] = "ping"


# --- errors (https://docs.anthropic.com/en/api/errors) -----------------------------------------

AnthropicErrorType = Literal[
    "invalid_request_error",
    "authentication_error",
    "permission_error",
    "not_found_error",
    "request_too_large",
    "rate_limit_error",
    "api_error",
    "overloaded_error",
]


class AnthropicErrorDetail(_Response):
    type: AnthropicErrorType
    message: str


class AnthropicErrorBody(_Response):
    type: Literal["error"] = "error"
    error: AnthropicErrorDetail
