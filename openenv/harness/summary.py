"""What one episode came to: the summary `openenv run --json` prints and the last line of its log.

One type for both, so the log line is the summary: `EpisodeSummary.from_log_line` reads the line a log
holds, including logs written before a field existed (its default is used) or by a newer openenv (fields
this version does not know are set aside in `unread`, not refused). Kept apart from `rollout.py` so that
reading logs (`openenv export`, the viewer) does not import the environment and its sandboxes.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr
from pydantic_core import to_json

from openenv.capture.logprob_mode import LogprobMode
from openenv.harness.outcome import EpisodeStatus
from openenv.harness.sandbox.base import ProcessStatus

__all__ = ["EpisodeSummary", "Policy", "SequenceLine", "log_line", "request_line"]

Policy = Literal["sample", "oracle", "demo", "run", "long"]

# Fields a log's summary line may lack (written before they existed), with what such a log meant.
_OLD_LOG_DEFAULTS: dict[str, Any] = {
    "harness": "",
    "task": "",
    "policy": "sample",
    "reward": None,
    "status": None,
    "turns": 0,
    "tool_calls": 0,
    "sequences": 0,
    "merge_ratio": 0.0,
    "aux_turns": 0,
    "reward_breakdown": {},
    "wall_s": 0.0,
}


class SequenceLine(BaseModel):
    """One training row of the episode, as `openenv run` lists it: why it began, where from, its size."""

    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="constants")

    origin: str
    parent: int | None
    turns: int
    tokens_trained: int


class EpisodeSummary(BaseModel):
    """What `openenv run --json` prints. `status` is one of `EpisodeStatus` (openenv/harness/outcome.py):
    `error` means our side ended the episode; then `reward` is None and `error` says why."""

    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="constants")
    _unread: dict[str, Any] = PrivateAttr(default_factory=dict)

    harness: str
    task: str
    policy: Policy
    reward: float | None = Field(description="None when the verifier produced no reward (see reward_status)")
    reward_status: str = "scored"
    no_reward_reason: str | None = None
    notes: list[str] = Field(default_factory=list, description="e.g. which image was substituted")
    status: EpisodeStatus | None
    error: str | None = Field(default=None, description="status `error`: what on our side ended the episode")
    harness_status: ProcessStatus | None = Field(default=None, description="how the harness process ended")
    turns: int
    tool_calls: int
    sequences: int
    merge_ratio: float
    aux_turns: int
    reward_breakdown: dict[str, float]
    wall_s: float
    trajectory: str | None = None
    budget_hit: str | None = Field(
        default=None, description="the budget cap that ended the episode (status `budget`)"
    )
    tokens_sampled: int = Field(default=0, description="policy tokens the model sampled (aux turns excluded)")
    tokens_trained: int = Field(default=0, description="policy tokens in the training rows (every sequence)")
    aux_tokens: int = Field(default=0, description="tokens sampled for aux requests; never trained")
    malformed_tool_calls: int = Field(default=0, description="tool-call attempts that did not parse cleanly")
    lineage: list[SequenceLine] = Field(
        default_factory=list, description="each training row's origin and parent"
    )
    temperature: float | None = Field(
        default=None, description="the temperature the episode's turns were sampled at"
    )
    logprob_mode: LogprobMode = Field(
        default="unknown",
        description="the engine's verdict on its logprobs: "
        "`processed` (log_softmax(logits / temperature)), `raw` or `unknown`",
    )
    trainable: bool = Field(
        default=False,
        description="every row's logprobs are the trainer's "
        "log_softmax(logits / temperature) over the full vocabulary",
    )

    @property
    def trained_ratio(self) -> float:
        """tokens_trained / tokens_sampled: 1.00 when every sampled token is in a training row."""
        return self.tokens_trained / self.tokens_sampled if self.tokens_sampled else 1.0

    @classmethod
    def from_log_line(cls, line: dict[str, Any]) -> EpisodeSummary:
        """The summary a log's `summary` line holds (without its `type` key).

        Lenient where logs differ by version only: a required field the line lacks takes its
        `_OLD_LOG_DEFAULTS` value, and a field this version does not know goes to `unread`. A value of the
        wrong type still fails (pydantic's ValidationError names the field)."""
        known = {k: v for k, v in line.items() if k in cls.model_fields}
        summary = cls.model_validate({**_OLD_LOG_DEFAULTS, **known})
        summary._unread = {k: v for k, v in line.items() if k not in cls.model_fields}
        return summary

    @property
    def unread(self) -> dict[str, Any]:
        """Fields of the log line this version of openenv does not know (written by a newer one)."""
        return dict(self._unread)


def log_line(kind: str, model: BaseModel) -> bytes:
    """One episode-log line, `{"type": kind, ...the model's fields}`, without its newline.

    Serialized by pydantic's core, not `json.dumps(model.model_dump(mode="json"))`: that was 2.5-3.9 ms
    of the env's CPU in every codex episode (150 KB of turns), this is ~0.5. The same keys and values,
    ASCII as before; infinities and NaN come out as `json.dumps` wrote them (`-Infinity`) because every
    logged model sets `ser_json_inf_nan="constants"` (pydantic's default, `null`, would not read back as
    the `-inf` logprob it was)."""
    body = _json(model)
    return b'{"type":' + json.dumps(kind).encode() + (b"}" if body == b"{}" else b"," + body[1:])


def request_line(turn_id: str, request: BaseModel) -> bytes:
    """A log's `request` line: the canonical request (`CanonicalRequest`) a turn answered, by turn id."""
    return (
        b'{"type":"request","turn_id":'
        + json.dumps(turn_id).encode()
        + b',"request":'
        + _json(request)
        + b"}"
    )


def _json(model: BaseModel) -> bytes:
    return to_json(model, by_alias=False, ensure_ascii=True)
