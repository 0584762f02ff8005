"""The episode log: one JSONL file per episode, read back into typed records.

`openenv run` (`openenv.harness.rollout.save_trajectory`) writes `turn`, `sequence` and `summary` lines.
Episodes run by `openenv eval` and the MCP tools add one `request` line per answered model request (its
canonical messages and tools), which is what the viewer's conversation pane and SFT export need.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from openenv.capture.canonical import CanonicalRequest
from openenv.capture.trajectory import SequenceRow, SequenceStats, TurnRecord
from openenv.errors import BadRequest, NotFound
from openenv.harness.summary import EpisodeSummary, request_line
from openenv.paths import safe_name, write_atomic

__all__ = [
    "EpisodeLog",
    "SkippedLog",
    "append_requests",
    "find_logs",
    "log_name",
    "read_episode",
    "read_episodes",
]


class EpisodeLog(BaseModel):
    """One episode as its log file holds it."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="the file stem, e.g. pi-fix-temperature-conversion-20261129-082701")
    turns: list[TurnRecord] = Field(default_factory=list)
    sequences: list[SequenceRow] = Field(default_factory=list)
    requests: dict[str, CanonicalRequest] = Field(default_factory=dict, description="turn id -> its request")
    summary: EpisodeSummary | None = None

    def stats(self) -> SequenceStats:
        """Merge statistics recomputed from the turns (the same rule as the capture trajectory)."""
        model = [t for t in self.turns if t.sequence is not None]
        merged = sum(t.kind == "merged" for t in model)
        mergeable = max(len(model) - 1, 0)
        return SequenceStats(
            turns=len(model),
            sequences=len(self.sequences),
            merged=merged,
            breaks=sum(t.kind == "break" for t in model),
            forks=sum(t.kind == "fork" for t in model),
            aux=sum(t.aux for t in self.turns),
            gaps=sum(t.gap is not None for t in self.turns),
            merge_ratio=merged / mergeable if mergeable else 1.0,
        )

    def offered_calls(self) -> tuple[int, int]:
        """(tool calls naming a tool their request offered, all tool calls) over the policy's turns whose request
        is logged. A parsed call of a name the harness does not have (another harness's tool, or a blend of
        several) is a call the harness rejects: counted in the second number only."""
        offered = total = 0
        for turn in self.turns:
            request = self.requests.get(turn.id)
            if turn.aux or turn.completion is None or request is None:
                continue
            names = {tool.name for tool in request.tools}
            total += len(turn.completion.tool_calls)
            offered += sum(call.name in names for call in turn.completion.tool_calls)
        return offered, total


def read_episode(path: str | Path) -> EpisodeLog:
    """Parse one trajectory JSONL file.

    Raises:
        NotFound: the file does not exist.
        BadRequest: a line is not JSON or does not match its `type`; the message names the line.
    """
    file = Path(path)
    if not file.is_file():
        raise NotFound(f"no trajectory file at {file}", path=str(file))
    log = EpisodeLog(name=file.stem)
    for number, line in enumerate(file.read_text().splitlines(), start=1):
        if line.strip():
            try:
                _add_line(log, json.loads(line))
            except (ValueError, ValidationError) as exc:
                raise BadRequest(f"{file}:{number}: not a trajectory line ({exc})", path=str(file)) from None
    return log


@dataclass(frozen=True)
class SkippedLog:
    """A log `read_episodes` left out, and why."""

    path: Path
    reason: str


def read_episodes(paths: Iterable[str | Path]) -> tuple[list[EpisodeLog], list[SkippedLog]]:
    """Read every log; a bad one (truncated, not JSON, or without its closing `summary` line because its
    writer died) is skipped and listed instead of failing the whole set."""
    logs: list[EpisodeLog] = []
    skipped: list[SkippedLog] = []
    for path in map(Path, paths):
        try:
            log = read_episode(path)
        except (BadRequest, NotFound, OSError, UnicodeDecodeError) as exc:
            skipped.append(SkippedLog(path, getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"))
            continue
        if log.summary is None:
            skipped.append(SkippedLog(path, f"{path}: no summary line (the episode's writer did not finish)"))
            continue
        logs.append(log)
    return logs, skipped


def _add_line(log: EpisodeLog, raw: dict[str, Any]) -> None:
    kind = raw.pop("type", None)
    match kind:
        case "turn":
            log.turns.append(TurnRecord.model_validate(raw))
        case "sequence":
            log.sequences.append(SequenceRow.model_validate(raw))
        case "request":
            log.requests[raw["turn_id"]] = CanonicalRequest.model_validate(raw["request"])
        case "summary":
            log.summary = EpisodeSummary.from_log_line(raw)
        case _:
            raise ValueError(f"unknown line type {kind!r}; expected turn, sequence, request or summary")


def append_requests(path: str | Path, requests: Mapping[str, CanonicalRequest]) -> None:
    """Add one `request` line per turn id to an episode log, atomically: the log is rewritten whole via a
    temp file, so a crash leaves the log without them or with all of them, never a torn line."""
    file = Path(path)
    lines = b"".join(request_line(turn_id, request) + b"\n" for turn_id, request in requests.items())
    write_atomic(file, file.read_bytes() + lines)


def log_name(harness: str, task: str) -> str:
    """A new episode log's file stem, unique even for two runs in the same second:
    `<harness>-<task>-<YYYYmmdd-HHMMSS>-<6 random hex>`.

    Raises:
        BadRequest: the harness or task id is not a plain name (`../x`, `a/b`, `.env`): it would lead
            the file elsewhere.
    """
    safe_name(harness, "harness")
    safe_name(task, "task id")
    return f"{harness}-{task}-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"


def find_logs(paths: Iterable[str | Path]) -> list[Path]:
    """The `.jsonl` files named, with folders expanded (sorted, recursively).

    Raises:
        NotFound: a path does not exist, or nothing was found.
    """
    found: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            found += sorted(p.rglob("*.jsonl"))
        elif p.is_file():
            found.append(p)
        else:
            raise NotFound(f"no such trajectory file or folder: {p}", path=str(p))
    if not found:
        raise NotFound("no trajectory .jsonl files found; run `openenv run` or `openenv eval` first")
    return found
