"""Gemini generateContent wire models: what Gemini CLI sends to `/v1beta/models/{m}:generateContent`
(and `:streamGenerateContent?alt=sse`, `:countTokens`) and what it expects back.

Fields follow https://ai.google.dev/api/generate-content. The wire is proto3 JSON, which accepts both
`lowerCamel` and `snake_case` names, so every model takes either and writes `lowerCamel`. A `Part` is
a proto `oneof` (no `type` field): exactly one of text / functionCall / functionResponse / ... is set.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)
from pydantic.alias_generators import to_camel

__all__ = [
    "Candidate",
    "Content",
    "CountTokensResponse",
    "FinishReason",
    "FunctionCall",
    "FunctionCallingConfig",
    "FunctionDeclaration",
    "FunctionResponse",
    "GeminiCall",
    "GeminiErrorBody",
    "GeminiErrorDetail",
    "GenerateContentRequest",
    "GenerateContentResponse",
    "GenerationConfig",
    "GoogleStatus",
    "Part",
    "ResponseContent",
    "ResponseFunctionCall",
    "ResponsePart",
    "ThinkingConfig",
    "Tool",
    "ToolConfig",
    "UsageMetadata",
]


class _Request(BaseModel):
    """Harness input: either name spelling, unknown fields kept (and ignored), never rejected."""

    model_config = ConfigDict(extra="allow", alias_generator=to_camel, populate_by_name=True)


class _Response(BaseModel):
    """Our output, written as proto3 JSON: camelCase names, unset (None) fields left out, since
    Gemini CLI tests parts by key (`"text" in part`) and a `null` would read as present."""

    model_config = ConfigDict(
        extra="forbid", alias_generator=to_camel, populate_by_name=True, serialize_by_alias=True
    )

    @model_serializer(mode="wrap")
    def _omit_unset(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return {k: v for k, v in handler(self).items() if v is not None}


class FunctionCall(_Request):
    id: str | None = None
    name: str
    args: dict[str, Any] = Field(default_factory=dict)


class FunctionResponse(_Request):
    id: str | None = None
    name: str
    response: dict[str, Any] = Field(default_factory=dict)


class Part(_Request):
    """One part. `thought: true` marks reasoning text; `thoughtSignature` is opaque and echoed back
    (Gemini CLI 0.61 sends `skip_thought_signature_validator` on its own function calls)."""

    text: str | None = None
    thought: bool | None = None
    thought_signature: str | None = None
    inline_data: dict[str, Any] | None = None
    file_data: dict[str, Any] | None = None
    function_call: FunctionCall | None = None
    function_response: FunctionResponse | None = None
    executable_code: dict[str, Any] | None = None
    code_execution_result: dict[str, Any] | None = None


class Content(_Request):
    role: Literal["user", "model", "function", "system"] | None = None
    parts: list[Part] = Field(default_factory=list)


class FunctionDeclaration(_Request):
    """A tool. `parametersJsonSchema` is plain JSON Schema; `parameters` is Google's OpenAPI subset
    (upper-case `type` names such as `OBJECT`), normalized to JSON Schema in convert.py."""

    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None
    parameters_json_schema: dict[str, Any] | None = None


class Tool(_Request):
    """`functionDeclarations`, or a built-in (googleSearch, codeExecution, ...) that is not offered."""

    function_declarations: list[FunctionDeclaration] | None = None


class FunctionCallingConfig(_Request):
    mode: Literal["AUTO", "ANY", "NONE", "VALIDATED", "MODE_UNSPECIFIED"] | None = None
    allowed_function_names: list[str] | None = None


class ToolConfig(_Request):
    function_calling_config: FunctionCallingConfig | None = None


class ThinkingConfig(_Request):
    include_thoughts: bool | None = None
    thinking_budget: int | None = None
    thinking_level: str | None = None


class GenerationConfig(_Request):
    stop_sequences: list[str] | None = None
    response_mime_type: str | None = None
    response_schema: dict[str, Any] | None = None
    response_json_schema: dict[str, Any] | None = None
    candidate_count: int | None = None
    max_output_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0)
    top_p: float | None = None
    top_k: float | None = None
    seed: int | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    thinking_config: ThinkingConfig | None = None


class GenerateContentRequest(_Request):
    """The body of `:generateContent` / `:streamGenerateContent` (the model comes from the URL path).

    `:countTokens` bodies validate too: they carry either bare `contents` or a whole request under
    `generateContentRequest`, which is unwrapped.
    """

    contents: list[Content]
    tools: list[Tool] | None = None
    tool_config: ToolConfig | None = None
    safety_settings: list[dict[str, Any]] | None = None
    system_instruction: Content | None = None
    generation_config: GenerationConfig | None = None
    cached_content: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _unwrap_count_tokens(cls, data: Any) -> Any:
        if isinstance(data, dict):
            inner = data.get("generateContentRequest", data.get("generate_content_request"))
            if isinstance(inner, dict):
                return inner
        return data


class CountTokensResponse(_Response):
    total_tokens: int


# --- response ----------------------------------------------------------------------------------


class ResponseFunctionCall(_Response):
    id: str | None = None
    name: str
    args: dict[str, Any]


class ResponsePart(_Response):
    text: str | None = None
    thought: bool | None = None
    thought_signature: str | None = None
    function_call: ResponseFunctionCall | None = None


class ResponseContent(_Response):
    role: Literal["model"] = "model"
    parts: list[ResponsePart]


FinishReason = Literal["STOP", "MAX_TOKENS", "SAFETY", "OTHER", "MALFORMED_FUNCTION_CALL"]


class Candidate(_Response):
    content: ResponseContent
    finish_reason: FinishReason | None = None
    index: int = 0


class UsageMetadata(_Response):
    prompt_token_count: int
    candidates_token_count: int
    total_token_count: int
    thoughts_token_count: int | None = None


class GenerateContentResponse(_Response):
    """A whole reply, or one streamed chunk (SSE `data:` lines carry this same shape)."""

    candidates: list[Candidate]
    usage_metadata: UsageMetadata | None = None
    model_version: str | None = None
    response_id: str | None = None


# --- errors (https://ai.google.dev/gemini-api/docs/troubleshooting) ----------------------------

GoogleStatus = Literal[
    "INVALID_ARGUMENT",
    "FAILED_PRECONDITION",
    "PERMISSION_DENIED",
    "UNAUTHENTICATED",
    "NOT_FOUND",
    "RESOURCE_EXHAUSTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DEADLINE_EXCEEDED",
]


class GeminiErrorDetail(_Response):
    code: int
    message: str
    status: GoogleStatus


class GeminiErrorBody(_Response):
    error: GeminiErrorDetail


@dataclass(frozen=True, slots=True)
class GeminiCall:
    """A generateContent body with what the route says about it: the model and whether to stream come
    from the path (`/v1beta/models/{model}:streamGenerateContent`), not the body."""

    model: str
    stream: bool
    body: GenerateContentRequest
