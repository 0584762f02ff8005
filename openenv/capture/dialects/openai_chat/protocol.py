"""OpenAI Chat Completions wire models (https://platform.openai.com/docs/api-reference/chat).

Requests are lenient (`extra="allow"`: harnesses send vendor extras we ignore); replies are exact.
Fields follow the order of the vendor docs.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = [
    "AssistantMessage",
    "ChatCompletion",
    "ChatCompletionChunk",
    "ChatCompletionRequest",
    "ChatMessage",
    "Choice",
    "ChoiceLogprobs",
    "ChunkChoice",
    "ContentPart",
    "Delta",
    "DeltaFunctionCall",
    "DeltaToolCall",
    "DeveloperMessage",
    "FunctionCall",
    "FunctionDefinition",
    "FunctionTool",
    "ModelCard",
    "ModelList",
    "NamedFunction",
    "NamedToolChoice",
    "ResponseMessage",
    "ResponseToolCall",
    "StreamOptions",
    "SystemMessage",
    "TokenLogprob",
    "ToolCall",
    "ToolMessage",
    "UsageInfo",
    "UserMessage",
]


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="allow")


class _Exact(BaseModel):
    model_config = ConfigDict(extra="forbid")


# ---- request ---------------------------------------------------------------------------------


class ContentPart(_Lenient):
    """A content array item: `text`, `image_url`, `input_audio`, `file` or `refusal`."""

    type: str = "text"
    text: str | None = None
    refusal: str | None = None


Content = str | list[ContentPart] | None


class FunctionCall(_Lenient):
    name: str
    arguments: str = "{}"

    @field_validator("arguments", mode="before")
    @classmethod
    def _normalize_arguments(cls, value: Any) -> Any:
        """Some clients send the arguments as an object rather than JSON text; keep JSON text."""
        if isinstance(value, dict):
            import json

            return json.dumps(value, ensure_ascii=False)
        return "{}" if value is None else value


class ToolCall(_Lenient):
    id: str = ""
    type: Literal["function"] = "function"
    function: FunctionCall


class SystemMessage(_Lenient):
    role: Literal["system"]
    content: Content = None
    name: str | None = None


class DeveloperMessage(_Lenient):
    role: Literal["developer"]
    content: Content = None
    name: str | None = None


class UserMessage(_Lenient):
    role: Literal["user"]
    content: Content = None
    name: str | None = None


class AssistantMessage(_Lenient):
    role: Literal["assistant"]
    content: Content = None
    refusal: str | None = None
    name: str | None = None
    tool_calls: list[ToolCall] | None = None
    # Not in OpenAI's docs: vLLM/DeepSeek-style reasoning echoed back by some harnesses.
    reasoning_content: str | None = None
    reasoning: str | None = None


class ToolMessage(_Lenient):
    """A tool result. Qwen Code sends `content` as an array of text parts, not a string."""

    role: Literal["tool"]
    content: Content = None
    tool_call_id: str
    name: str | None = None


ChatMessage = Annotated[
    SystemMessage | DeveloperMessage | UserMessage | AssistantMessage | ToolMessage,
    Field(discriminator="role"),
]


class FunctionDefinition(_Lenient):
    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class FunctionTool(_Lenient):
    type: Literal["function"] = "function"
    function: FunctionDefinition


class NamedFunction(_Lenient):
    name: str


class NamedToolChoice(_Lenient):
    type: Literal["function"] = "function"
    function: NamedFunction


class StreamOptions(_Lenient):
    include_usage: bool | None = None


class ChatCompletionRequest(_Lenient):
    messages: list[ChatMessage] = Field(min_length=1)
    model: str = ""
    frequency_penalty: float | None = None
    logprobs: bool | None = None
    max_completion_tokens: int | None = Field(default=None, ge=1)
    max_tokens: int | None = Field(default=None, ge=1)
    n: int | None = None
    parallel_tool_calls: bool | None = None
    presence_penalty: float | None = None
    seed: int | None = None
    stop: str | list[str] | None = None
    stream: bool | None = False
    stream_options: StreamOptions | None = None
    temperature: float | None = None
    tool_choice: Literal["none", "auto", "required"] | NamedToolChoice | None = None
    tools: list[FunctionTool] | None = None
    top_logprobs: int | None = None
    top_p: float | None = None
    # vLLM extras some trainers send.
    top_k: int | None = None
    min_p: float | None = None
    repetition_penalty: float | None = None


# ---- reply -----------------------------------------------------------------------------------


class ResponseToolCall(_Exact):
    id: str
    type: Literal["function"] = "function"
    function: FunctionCall


class ResponseMessage(_Exact):
    role: Literal["assistant"] = "assistant"
    content: str | None = None
    refusal: str | None = None
    tool_calls: list[ResponseToolCall] | None = None
    reasoning_content: str | None = None


class TokenLogprob(_Exact):
    token: str
    logprob: float
    bytes: list[int] | None = None
    top_logprobs: list[dict[str, Any]] = Field(default_factory=list)


class ChoiceLogprobs(_Exact):
    content: list[TokenLogprob] | None = None


class Choice(_Exact):
    index: int = 0
    message: ResponseMessage
    logprobs: ChoiceLogprobs | None = None
    finish_reason: Literal["stop", "length", "tool_calls", "content_filter"]


class UsageInfo(_Exact):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class ChatCompletion(_Exact):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[Choice]
    usage: UsageInfo


class DeltaFunctionCall(_Exact):
    name: str | None = None
    arguments: str | None = None


class DeltaToolCall(_Exact):
    index: int
    id: str | None = None
    type: Literal["function"] | None = None
    function: DeltaFunctionCall


class Delta(_Exact):
    role: Literal["assistant"] | None = None
    content: str | None = None
    reasoning_content: str | None = None
    tool_calls: list[DeltaToolCall] | None = None


class ChunkChoice(_Exact):
    index: int = 0
    delta: Delta
    logprobs: ChoiceLogprobs | None = None
    finish_reason: Literal["stop", "length", "tool_calls", "content_filter"] | None = None


class ChatCompletionChunk(_Exact):
    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int
    model: str
    choices: list[ChunkChoice]
    usage: UsageInfo | None = None


class ModelCard(_Exact):
    id: str
    object: Literal["model"] = "model"
    created: int = 0
    owned_by: str = "openenv"


class ModelList(_Exact):
    object: Literal["list"] = "list"
    data: list[ModelCard]
