"""The canonical request and completion: the one internal shape every dialect maps to and from.

Dialects convert their wire models into a `CanonicalRequest` and build their reply from a
`Completion`; nothing else in `openenv.capture` sees a vendor format. The models are frozen pydantic
models so they validate once at construction, serialize for the admin API and observations, and can
be shared between threads without copies.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "CanonicalRequest",
    "Completion",
    "FinishReason",
    "Message",
    "Part",
    "Role",
    "SamplingParams",
    "TextPart",
    "ToolCallAttempt",
    "ThinkingPart",
    "Tool",
    "ToolCallPart",
    "ToolChoice",
    "ToolResultPart",
    "Usage",
]

Role = Literal["system", "user", "assistant", "tool"]
FinishReason = Literal["stop", "length", "tool_calls"]


class _Frozen(BaseModel):
    # Infinities and NaN serialize as JSON's `-Infinity`/`NaN` extension (as `json.dumps` writes them), not
    # as `null`: an episode log written by pydantic must read back the same (`summary.log_line`).
    model_config = ConfigDict(frozen=True, extra="forbid", ser_json_inf_nan="constants")


class TextPart(_Frozen):
    """Plain text from any role."""

    type: Literal["text"] = "text"
    text: str


class ThinkingPart(_Frozen):
    """Model reasoning. `signature` carries a vendor's opaque echo token (Anthropic, Gemini)."""

    type: Literal["thinking"] = "thinking"
    text: str
    signature: str | None = None


class ToolCallPart(_Frozen):
    """An assistant's call of a tool. `arguments` is the JSON object text, exactly as produced."""

    type: Literal["tool_call"] = "tool_call"
    id: str
    name: str
    arguments: str = "{}"

    def parsed_arguments(self) -> dict[str, Any]:
        """The arguments as a dict; text that is not a JSON object comes back as `{}`."""
        try:
            value = json.loads(self.arguments)
        except ValueError:
            return {}
        return value if isinstance(value, dict) else {}


class ToolResultPart(_Frozen):
    """The result of one tool call, sent back by the harness. Lives in a `tool` message."""

    type: Literal["tool_result"] = "tool_result"
    tool_call_id: str
    content: str
    name: str | None = None
    is_error: bool = False


Part = Annotated[TextPart | ThinkingPart | ToolCallPart | ToolResultPart, Field(discriminator="type")]


class Message(_Frozen):
    """One conversation message.

    Conventions every dialect follows: `system` holds text parts; `assistant` holds text,
    thinking and tool-call parts; tool results travel as `tool` messages, one `ToolResultPart`
    each, in the order the harness sent them (dialects split mixed user blocks accordingly).
    """

    role: Role
    parts: tuple[Part, ...] = ()

    def text(self) -> str:
        """The concatenated text parts."""
        return "".join(p.text for p in self.parts if isinstance(p, TextPart))

    def thinking(self) -> str:
        return "".join(p.text for p in self.parts if isinstance(p, ThinkingPart))

    def tool_calls(self) -> list[ToolCallPart]:
        return [p for p in self.parts if isinstance(p, ToolCallPart)]


class Tool(_Frozen):
    """A function the model may call; `parameters` is its JSON Schema (an object schema)."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})


class ToolChoice(_Frozen):
    """How the model may use tools: `named` forces the tool called `name`."""

    mode: Literal["auto", "none", "required", "named"] = "auto"
    name: str | None = None


class SamplingParams(_Frozen):
    """Sampling settings. `None` means "not set": the backend's default, or a proxy override."""

    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    min_p: float | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    repetition_penalty: float | None = None
    seed: int | None = None
    stop: tuple[str, ...] = ()
    # JSON Schema the reply must satisfy (Gemini CLI's router asks for schema-valid JSON); a backend
    # that cannot constrain decoding ignores it.
    json_schema: dict[str, Any] | None = None

    def merged(self, override: SamplingParams | None) -> SamplingParams:
        """These settings with every field set in `override` replacing ours (the proxy wins)."""
        if override is None:
            return self
        return self.model_copy(update=override.model_dump(exclude_unset=True, exclude_defaults=True))


class CanonicalRequest(_Frozen):
    """One model request from a harness, in our own shape.

    Attributes:
        model: the model name the harness asked for (echoed back in replies).
        messages: the whole conversation so far, system message(s) included.
        tools: the tools offered, as JSON Schema.
        tool_choice: how the model may use them.
        sampling: the harness's sampling settings (the proxy's override them).
        stream: whether the harness wants server-sent events.
    """

    model: str = ""
    messages: tuple[Message, ...]
    tools: tuple[Tool, ...] = ()
    tool_choice: ToolChoice = ToolChoice()
    sampling: SamplingParams = SamplingParams()
    stream: bool = False

    def system_text(self) -> str:
        """All system text, joined by blank lines (for aux predicates and dialect mapping)."""
        return "\n\n".join(m.text() for m in self.messages if m.role == "system")


class Usage(_Frozen):
    """Token counts of one turn, from the proxy's own ids."""

    prompt_tokens: int
    completion_tokens: int

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class ToolCallAttempt(_Frozen):
    """Where the model began a tool call in a completion, and whether it parsed.

    `status`: `parsed`, `malformed` (the block closed but its body does not decode; it stays in the
    text) or `missing_close` (the block never closed; `calls` > 0 when its body decoded anyway).
    `token_start`/`token_end`: the span in the completion's `token_ids` (end exclusive).
    """

    status: Literal["parsed", "malformed", "missing_close"]
    token_start: int
    token_end: int
    calls: int = 0


class Completion(_Frozen):
    """The reply to one request: parsed text plus the exact ids and logprobs behind it.

    Attributes:
        id: the turn id; dialects derive their response ids from it.
        model: the model name to report (the one the harness asked for).
        created: unix seconds when the turn was recorded.
        text: the visible content, with reasoning and tool-call markup removed.
        reasoning: the reasoning text (`<think>` content), or "".
        tool_calls: parsed tool calls with proxy-assigned ids.
        token_ids: the completion's token ids, exactly as sampled (or as supplied and scored).
        logprobs: one logprob per completion token.
        finish_reason: `tool_calls` when calls were parsed, else `stop` or `length`.
        usage: prompt and completion token counts.
    """

    id: str
    model: str
    created: int
    text: str = ""
    reasoning: str = ""
    tool_calls: tuple[ToolCallPart, ...] = ()
    token_ids: tuple[int, ...] = ()
    logprobs: tuple[float, ...] = ()
    finish_reason: FinishReason = "stop"
    usage: Usage = Usage(prompt_tokens=0, completion_tokens=0)
    call_attempts: tuple[ToolCallAttempt, ...] = ()  # every tool-call attempt and its parse status
