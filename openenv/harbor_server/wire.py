"""The Harbor env road's wire shapes: what `openenv serve harbor` answers the reference's `HarborEnv`.

Field names and meanings follow the reference OpenEnv's `openenv.harbor.models` (0.10.0): a trainer in
the reference's venv re-validates every answer with its own `HarborTaskRef` / `HarborRolloutResult`
(tests/interop/test_harbor_road.py checks that against the real package). Written here, not imported:
the reference's import name is also `openenv`, so the two never share a venv.

A failed episode is still a result (`ok=False`, `error` set, `reward` None), never an exception across
the wire and never a 0: a trainer rank that raises mid-rollout hangs every other rank at its barrier.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

__all__ = ["HarborConversation", "HarborRolloutResult", "HarborTaskRef", "HarborTurn"]


class HarborTaskRef(BaseModel):
    """One task as the Task API lists it: what a trainer's dataset row holds."""

    index: int
    task_id: str
    task_name: str
    dataset: str = ""
    instruction: str = ""


class HarborTurn(BaseModel):
    """One model turn, exactly as captured: the prompt ids the engine saw (the whole context before the
    turn, tool results included), the sampled ids and their logprobs, and a full prompt+completion
    `loss_mask` (1 on the tokens this turn may train)."""

    turn: int
    role: str = "agent"
    finish_reason: str | None = None
    prompt_token_ids: list[int] = Field(default_factory=list)
    completion_token_ids: list[int] = Field(default_factory=list)
    per_token_logps: list[float] = Field(default_factory=list)
    loss_mask: list[int] | None = None
    node_id: str = ""
    n_tools: int = 0
    discarded: bool = False
    trainable: bool = True
    sampling_params: dict[str, Any] = Field(default_factory=dict)
    requested_sampling_params: dict[str, Any] = Field(default_factory=dict)
    text: str = ""
    tool_calls: list[dict[str, Any]] = Field(default_factory=list)
    request_messages: list[dict[str, Any]] = Field(default_factory=list)
    request_tools: list[dict[str, Any]] | None = None


class HarborConversation(BaseModel):
    """One conversation of a rollout (a training sequence of ours), as readable messages."""

    root_id: str = ""
    role: str = "agent"
    n_turns: int = 0
    messages: list[dict[str, Any]] = Field(default_factory=list)


class HarborRolloutResult(BaseModel):
    """Everything one `run_rollout` produced (see the module doc for the failure shape)."""

    task_id: str = ""
    task_name: str = ""
    dataset: str = ""
    harness: str = ""
    sandbox: str = ""
    trial_name: str = ""
    session_id: str = ""
    reward: float | None = None
    rewards: dict[str, float] = Field(default_factory=dict)
    reward_key: str = ""
    rollout_type: str = "train"
    capture_level: str = "tokens"
    param_fixes: list[str] = Field(default_factory=list)
    turns: list[HarborTurn] = Field(default_factory=list)
    conversations: list[HarborConversation] = Field(default_factory=list)
    n_turns: int = 0
    n_roots: int = 0
    budget_stop_count: int = 0
    n_trainable_tokens: int = 0
    multi_turn: bool = False
    atif: str = "none"
    trace_source: str = ""
    findings: list[str] = Field(default_factory=list)
    wall_s: float = 0.0
    phase_timings: dict[str, float] = Field(default_factory=dict)
    agent_log_tail: str = ""
    ok: bool = True
    error: str | None = None
    exception_type: str | None = None
