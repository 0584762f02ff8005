"""Gemini generateContent wire models: what Gemini CLI sends to `/v1beta/models/{m}:generateContent`
(and `:streamGenerateContent?alt=sse`, `:countTokens`) and what it expects back.

Fields follow https://ai.google.dev/api/generate-content. The wire is proto3 JSON, which accepts both
`lowerCamel` and `snake_case` names, so every model takes either and writes `lowerCamel`. A `Part` is
a proto `oneof` (no `type` field): exactly one of text / functionCall / functionResponse / ... is set.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

__all__ = [
    "Candidate",
    "Content",
    "CountTokensRequest",
    "CountTokensResponse",
    "FunctionCall",
    "FunctionCallingConfig",
    "FunctionDeclaration",
    "FunctionResponse",
    "GeminiErrorBody",
    "GeminiErrorDetail",
    "GenerateContentRequest",
    "GenerateContentResponse",
    "GenerationConfig",
    "Part",
    "ThinkingConfig",
    "Tool",
    "ToolConfig",
    "UsageMetadata",
]


class _Request(BaseModel):
    """Harness input: either name spelling, unknown fields kept (and ignored), never rejected."""

    model_config = ConfigDict(extra="allow", alias_generator=to_camel, populate_by_name=True)


class _Response(BaseModel):
    """Our output, written with camelCase aliases (`model_dump(by_alias=True)`)."""

    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, populate_by_name=True)


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
    """The body of `:generateContent` / `:streamGenerateContent`; the model comes from the URL path."""

    contents: list[Content]
    tools: list[Tool] | None = None
    tool_config: ToolConfig | None = None
    safety_settings: list[dict[str, Any]] | None = None
    system_instruction: Content | None = None
    generation_config: GenerationConfig | None = None
    cached_content: str | None = None


class CountTokensRequest(_Request):
    """`:countTokens` takes either bare `contents` or a whole `generateContentRequest`."""

    contents: list[Content] | None = None
    generate_content_request: GenerateContentRequest | None = None


class CountTokensResponse(_Response):
    total_tokens: int


# --- response ----------------------------------------------------------------------------------


class _OutFunctionCall(_Response):
    id: str | None = None
    name: str
    args: dict[str, Any]


class _OutPart(_Response):
    text: str | None = None
    thought: bool | None = None
    thought_signature: str | None = None
    function_call: _OutFunctionCall | None = None


class _OutContent(_Response):
    role: Literal["model"] = "model"
    parts: list[_OutPart]


FinishReason = Literal["STOP", "MAX_TOKENS", "SAFETY", "OTHER", "MALFORMED_FUNCTION_CALL"]


class Candidate(_Response):
    content: _OutContent
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
