"""Episode logs -> Hugging Face `datasets`, in two shapes.

- `tokens` (RL): one row per training sequence, with TRL's GRPO keys `prompt_ids`, `completion_ids`,
  `logprobs` and `env_mask`, plus the episode's reward and where it came from.
- `messages` (SFT): one row per training sequence, as a chat: the newest turn's request messages and the
  assistant reply it got, in the OpenAI chat shape SFT trainers read (`role`, `content`, `tool_calls`,
  `tool_call_id`), with the tools as JSON Schema text. Needs the log's `request` lines.

Each export is written twice, as `save_to_disk` (Arrow) and as one parquet file.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from openenv.capture.canonical import (
    Completion,
    Message,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from openenv.errors import BadRequest
from openenv.export.log import EpisodeLog

__all__ = [
    "ExportResult",
    "Shape",
    "export_episodes",
    "messages_features",
    "messages_rows",
    "token_features",
    "token_rows",
]

Shape = Literal["tokens", "messages"]


def _episode_fields(log: EpisodeLog) -> dict[str, Any]:
    s = log.summary
    return {
        "episode": log.name,
        "harness": s.harness if s else "",
        "task": s.task if s else "",
        "reward": float(s.reward or 0.0) if s else 0.0,
    }


def token_rows(logs: Sequence[EpisodeLog]) -> list[dict[str, Any]]:
    """One row per training sequence: the ids, logprobs and mask exactly as captured."""
    rows = []
    for log in logs:
        for index, seq in enumerate(log.sequences):
            rows.append({**_episode_fields(log), "sequence": index, **seq.model_dump()})
    return rows


def token_features() -> Any:
    from datasets import Features, List, Value

    return Features(
        {
            "episode": Value("string"),
            "harness": Value("string"),
            "task": Value("string"),
            "reward": Value("float64"),
            "sequence": Value("int32"),
            "prompt_ids": List(Value("int32")),
            "completion_ids": List(Value("int32")),
            "logprobs": List(Value("float32")),
            "env_mask": List(Value("int8")),
            "turn_ids": List(Value("string")),
            "origin": Value("string"),
            "parent": Value("int32"),  # lineage: why the sequence began, from which
            # what the logprobs mean (capture/logprob_mode.py): sampled at this temperature, the engine's
            # verdict (processed / raw / unknown), and whether a trainer may use them as behaviour logprobs
            "temperature": Value("float64"),
            "logprob_mode": Value("string"),
            "trainable": Value("bool"),
        }
    )


def _chat_message(message: Message) -> dict[str, Any]:
    """A canonical message in the OpenAI chat shape (one fixed schema, so Arrow can store it)."""
    calls = [
        {"id": p.id, "name": p.name, "arguments": p.arguments}
        for p in message.parts
        if isinstance(p, ToolCallPart)
    ]
    result = next((p for p in message.parts if isinstance(p, ToolResultPart)), None)
    content = result.content if result is not None else message.text()
    reasoning = "".join(p.text for p in message.parts if isinstance(p, ThinkingPart))
    return {
        "role": message.role,
        "content": content,
        "reasoning": reasoning,
        "tool_calls": calls,
        "tool_call_id": result.tool_call_id if result is not None else "",
        "name": (result.name or "") if result is not None else "",
    }


def _reply(done: Completion) -> Message:
    parts: list[Any] = [ThinkingPart(text=done.reasoning)] if done.reasoning else []
    parts += [TextPart(text=done.text)] if done.text else []
    return Message(role="assistant", parts=(*parts, *done.tool_calls))


def messages_rows(logs: Sequence[EpisodeLog]) -> list[dict[str, Any]]:
    """One chat per training sequence: its newest turn's request plus the reply the harness got.

    Raises:
        BadRequest: a log has sequences but no `request` lines (written by `openenv run`, not
            `openenv eval`), so its messages are unknown.
    """
    rows = []
    for log in logs:
        turns = {t.id: t for t in log.turns}
        for index, seq in enumerate(log.sequences):
            head = turns.get(seq.turn_ids[-1])
            request = log.requests.get(seq.turn_ids[-1])
            if head is None or head.completion is None or request is None:
                raise BadRequest(
                    f"episode {log.name} has no request for turn {seq.turn_ids[-1]}; messages "
                    "export needs logs written by `openenv eval` (or the MCP run_episode tool)"
                )
            chat = [*request.messages, _reply(head.completion)]
            rows.append(
                {
                    **_episode_fields(log),
                    "sequence": index,
                    "messages": [_chat_message(m) for m in chat],
                    "tools": [json.dumps(t.model_dump()) for t in request.tools],
                }
            )
    return rows


def messages_features() -> Any:
    from datasets import Features, List, Value

    call = {"id": Value("string"), "name": Value("string"), "arguments": Value("string")}
    message = {
        "role": Value("string"),
        "content": Value("string"),
        "reasoning": Value("string"),
        "tool_calls": List(call),
        "tool_call_id": Value("string"),
        "name": Value("string"),
    }
    return Features(
        {
            "episode": Value("string"),
            "harness": Value("string"),
            "task": Value("string"),
            "reward": Value("float64"),
            "sequence": Value("int32"),
            "messages": List(message),
            "tools": List(Value("string")),
        }
    )


@dataclass(frozen=True)
class ExportResult:
    """Where one export went."""

    shape: Shape
    rows: int
    disk_path: Path
    parquet_path: Path


def export_episodes(logs: Sequence[EpisodeLog], out: Path, *, shape: Shape) -> ExportResult:
    """Write the logs as a dataset: `out/<shape>/` (save_to_disk) and `out/<shape>.parquet`.

    Raises:
        BadRequest: there are no rows (no sequences in the logs), or messages are missing.
    """
    from datasets import Dataset

    rows, features = (
        (token_rows(logs), token_features())
        if shape == "tokens"
        else (messages_rows(logs), messages_features())
    )
    if not rows:
        raise BadRequest(f"the {len(logs)} episode log(s) hold no training sequences; nothing to export")
    dataset = Dataset.from_list(rows, features=features)
    out.mkdir(parents=True, exist_ok=True)
    disk, parquet = out / shape, out / f"{shape}.parquet"
    # Trajectories are written 0600 (whole episodes: prompts, tool output, the task's code), and an export
    # keeps that: it is written in a 0700 staging folder, made owner-only, then moved into place, so no
    # other local user can read it at any moment (the red-team found 0600 logs exported 0644).
    staging = Path(tempfile.mkdtemp(prefix=f".{shape}-", dir=out))
    try:
        dataset.save_to_disk(str(staging / shape))
        dataset.to_parquet(str(staging / parquet.name))
        _owner_only(staging)
        for final in (disk, parquet):
            if final.is_dir() and not final.is_symlink():
                shutil.rmtree(final)
            (staging / final.name).replace(final)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return ExportResult(shape=shape, rows=len(rows), disk_path=disk, parquet_path=parquet)


def _owner_only(root: Path) -> None:
    """Folders 0700 and files 0600 below `root`."""
    for folder, _, files in os.walk(root):
        os.chmod(folder, 0o700)
        for name in files:
            os.chmod(os.path.join(folder, name), 0o600)
