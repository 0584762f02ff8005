"""The harness environment's wire models: its action, observation and state."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from openenv.capture.canonical import CanonicalRequest, ToolCallPart
from openenv.capture.trajectory import SequenceRow, SequenceStats
from openenv.core.types import Action, Observation, State
from openenv.harness.sandbox.base import ProcessStatus

__all__ = [
    "EpisodeStatus",
    "HarnessAction",
    "HarnessObservation",
    "HarnessState",
    "LastTurn",
    "PendingTurnView",
]

EpisodeStatus = Literal["idle", "waiting", "done"]


class HarnessAction(Action):
    """Who answers the pending model request.

    `sample`: the backend samples it. `complete`: the reply is `text` (tokenized, end-of-turn added)
    or exact `token_ids`, scored by the backend for logprobs. `run`: sample every remaining turn.
    """

    kind: Literal["sample", "complete", "run"]
    text: str | None = None
    token_ids: list[int] | None = None

    @model_validator(mode="after")
    def _reply_only_for_complete(self) -> HarnessAction:
        given = (self.text is not None) + (self.token_ids is not None)
        if self.kind == "complete" and given != 1:
            raise ValueError("a `complete` action needs exactly one of `text` or `token_ids`")
        if self.kind != "complete" and given:
            raise ValueError(f"a `{self.kind}` action takes no `text` or `token_ids`")
        return self


class _View(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PendingTurnView(_View):
    """The model request the harness is waiting on: the observation's view of capture's `PendingTurn`."""

    turn_id: str
    dialect: str
    request: CanonicalRequest = Field(description="canonical messages, tools and sampling settings")
    prompt_ids: list[int] = Field(description="the exact ids the reply will be conditioned on")
    text: str = Field(
        default="", description="prompt_ids decoded: the prompt as the chat template rendered it"
    )
    aux: bool = False


class LastTurn(_View):
    """The reply to the previous request, as the harness received it."""

    turn_id: str
    text: str
    reasoning: str = ""
    tool_calls: list[ToolCallPart] = Field(default_factory=list)
    token_ids: list[int]
    logprobs: list[float]
    finish_reason: str


class HarnessObservation(Observation):
    """What the policy sees: the pending request, the last turn, and the harness's progress.

    At `done`, `reward_breakdown` holds the verifier's dict and `sequences` the training rows; when the
    verifier produced no reward, `reward` is None and `reward_status` / `no_reward_reason` say why.
    """

    pending: PendingTurnView | None = None
    last_turn: LastTurn | None = None
    turns: int = 0
    tool_calls: int = 0
    harness_status: ProcessStatus | None = None
    output_tail: str = ""
    reward_breakdown: dict[str, float] | None = None
    reward_status: str | None = Field(
        default=None,
        description="at done: scored, reward_missing, reward_empty, "
        "reward_invalid, verifier_timeout or verifier_error",
    )
    no_reward_reason: str | None = None
    sequences: list[SequenceRow] | None = None
    stats: SequenceStats | None = None
    budget_hit: str | None = Field(
        default=None,
        description="at done: the budget cap that ended the episode "
        "(`max_turns=N`, ...); the episode's status is then `budget`",
    )


class HarnessState(State):
    """Episode id, step count, and which harness is on which task in what status."""

    harness: str
    task_id: str | None = None
    status: EpisodeStatus = "idle"
    harness_status: ProcessStatus | None = None
