"""The per-session journal: every recorded turn on disk before its reply is sent.

A proxy holds its sessions in memory; a crash, an OOM kill or a SIGKILL would lose every turn of every
live session. With a journal, each session appends one JSON line per turn to `<dir>/<id>.jsonl`, written
(and by default `fsync`ed) before the harness gets the reply, so a killed proxy loses at most the turns
still in flight: no harness ever acted on a reply that is not on disk.

A line holds what the training sequences need and nothing the tokenizer can recompute: the turn's
place in the trajectory (sequence, parent, kind), its completion ids and logprobs, the env ids inserted
since the turn it extends (merged turns), or its whole prompt ids (a turn that starts a sequence). A
linear 30-turn session costs its length on disk, not its length squared. `rebuild` replays the lines
through `Trajectory.record`, the same code that built the live sequences, so a rebuilt session's rows
equal the live ones token for token and logprob for logprob (msgspec writes floats round-trip exact).

The write is `os.write` on the event loop, in record order (a page-cache copy, microseconds); the
`fsync` that makes it durable runs on a small thread pool, so a slow disk delays that session's reply,
never the loop. A last line cut short by the kill is skipped on read and counted.
"""

from __future__ import annotations

import asyncio
import errno
import os
import secrets
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from openenv.capture.canonical import Completion, Usage
from openenv.capture.trajectory import Link, SequenceRow, SequenceStats, Trajectory, Turn
from openenv.errors import BadRequest

__all__ = ["Journal", "JournalContents", "find_journals", "read_journal", "rebuild", "rebuild_rows"]

VERSION = 1
_ENCODE = msgspec.json.Encoder().encode
_DECODE = msgspec.json.Decoder().decode
_FSYNC_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    """Threads that wait on `fsync` (a disk wait, not CPU): a few sessions flush at once."""
    global _FSYNC_POOL
    with _POOL_LOCK:
        if _FSYNC_POOL is None:
            _FSYNC_POOL = ThreadPoolExecutor(max_workers=4, thread_name_prefix="journal-fsync")
        return _FSYNC_POOL


class Journal:
    """One session's append-only JSONL file. Call `turn`/`close` on the session's event loop.

    Args:
        folder: where journals go (created if missing).
        fsync: make every turn durable (`fsync`) before the reply is sent; off, a line is still written
            before the reply (it survives a killed proxy, not a power loss) and costs no disk wait.
        meta: extra header fields (mode, served model, ...).

    Attributes:
        id: the journal's id and file stem (time-ordered, random; never the session's secret token).
        path: the file.
    """

    def __init__(self, folder: str | Path, *, fsync: bool = True, meta: dict[str, Any] | None = None) -> None:
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        self.id = time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + "-" + secrets.token_hex(6)
        self.path = folder / f"{self.id}.jsonl"
        self.fsync = fsync
        # O_APPEND: each line is one write() at the file's end, whole or (killed mid-write) cut short.
        self._fd: int | None = os.open(
            self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600
        )
        self._write(
            {"t": "session", "version": VERSION, "id": self.id, "opened": time.time(), **(meta or {})}
        )
        if fsync:
            _fsync_dir(folder)  # the file's name survives a crash too, not only its bytes

    async def turn(
        self, turn: Turn, *, prompt_ids: Sequence[int], env_ids: Sequence[int], max_tokens: int | None = None
    ) -> None:
        """Append a finished turn (recorded or a gap) and wait until it is durable."""
        line: dict[str, Any] = {
            "t": "turn",
            "id": turn.id,
            "index": turn.index,
            "dialect": turn.dialect,
            "aux": turn.aux,
            "source": turn.source,
            "gap": turn.gap,
            "seq": turn.sequence,
            "parent": turn.parent,
            "kind": turn.kind,
            "prompt_len": turn.prompt_len,
        }
        if max_tokens is not None:
            line["max_tokens"] = max_tokens
        if turn.overridden:
            line["overridden"] = turn.overridden
        done = turn.completion
        if done is not None and turn.sequence is not None:
            if turn.kind == "merged":
                line["env_ids"] = env_ids
            else:
                line["prompt_ids"] = prompt_ids
            line["completion_ids"] = done.token_ids
            line["logprobs"] = done.logprobs
            line["finish"] = done.finish_reason
            # What the logprobs mean (capture/logprob_mode.py). A line without these predates them: `rebuild`
            # reads it as mode `unknown`, never as the sampling distribution's.
            line["temperature"] = turn.temperature
            line["logprob_mode"] = turn.logprob_mode
            line["trainable"] = turn.trainable
        self._write(line)
        if self.fsync:
            await self._flush()

    def close(self, reason: str = "closed") -> None:
        """Append the closing line and release the file (idempotent; the last fsync runs in the background)."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        os.write(fd, _ENCODE({"t": "closed", "reason": reason, "at": time.time()}) + b"\n")
        if self.fsync:
            _pool().submit(_sync_and_close, fd)
        else:
            os.close(fd)

    def _write(self, record: dict[str, Any]) -> None:
        if self._fd is None:
            return
        os.write(self._fd, _ENCODE(record) + b"\n")

    async def _flush(self) -> None:
        fd = self._fd
        if fd is not None:
            await asyncio.get_running_loop().run_in_executor(_pool(), _datasync, fd)


def _datasync(fd: int) -> None:
    try:
        os.fdatasync(fd)
    except OSError as exc:  # closed by close() meanwhile: its own sync covers this line
        if exc.errno != errno.EBADF:
            raise


def _sync_and_close(fd: int) -> None:
    try:
        os.fdatasync(fd)
    finally:
        os.close(fd)


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# ---- reading back -------------------------------------------------------------------------------------


@dataclass
class JournalContents:
    """A journal read back: its header, its turn lines, and what could not be read.

    Attributes:
        header: the session line (id, opened, mode, ...).
        turns: the turn lines in the order they were written.
        closed: the closing reason, or None when the proxy died with the session open.
        bad_lines: lines that are not JSON (a last line cut short by a kill), by line number.
    """

    path: Path
    header: dict[str, Any]
    turns: list[dict[str, Any]] = field(default_factory=list)
    closed: str | None = None
    bad_lines: list[int] = field(default_factory=list)


def read_journal(path: str | Path) -> JournalContents:
    """Parse one journal file.

    Raises:
        BadRequest: the file has no session header (not a journal).
    """
    path = Path(path)
    contents: JournalContents | None = None
    bad: list[int] = []
    with path.open("rb") as f:
        for number, raw in enumerate(f, 1):
            try:
                line = _DECODE(raw)
            except msgspec.DecodeError:
                bad.append(number)
                continue
            kind = line.get("t") if isinstance(line, dict) else None
            if kind == "session" and contents is None:
                contents = JournalContents(path=path, header=line)
            elif contents is None:
                bad.append(number)
            elif kind == "turn":
                contents.turns.append(line)
            elif kind == "closed":
                contents.closed = str(line.get("reason", "closed"))
            else:
                bad.append(number)
    if contents is None:
        raise BadRequest(f"{path} is not a capture journal (no session header line)")
    contents.bad_lines = bad
    return contents


def rebuild(path: str | Path) -> tuple[Trajectory, JournalContents]:
    """A session's trajectory rebuilt from its journal, through the same `record` that built it live.

    `trajectory.rows()` are then the training sequences the live session had when the last line was
    written (messages are not journaled, so the rebuilt trajectory cannot link new turns). A journal written
    before turns recorded their logprob mode rebuilds with every row `logprob_mode="unknown"`, not trainable.
    """
    contents = read_journal(path)
    trajectory = Trajectory()
    for line in contents.turns:
        mode = line.get("logprob_mode")
        known = mode in ("processed", "raw")
        turn = trajectory.add(
            Turn(
                id=line["id"],
                index=0,
                dialect=line["dialect"],
                aux=bool(line["aux"]),
                n_messages=0,
                prompt_len=int(line["prompt_len"]),
                source=line.get("source"),
                gap=line.get("gap"),
                temperature=line.get("temperature"),
                logprob_mode=mode if known else "unknown",
                trainable=known and bool(line.get("trainable")),
            )
        )
        if "completion_ids" not in line:
            continue
        ids = tuple(line["completion_ids"])
        turn.completion = Completion(
            id=turn.id,
            model="",
            created=0,
            token_ids=ids,
            logprobs=tuple(line["logprobs"]),
            finish_reason=line.get("finish", "stop"),
            usage=Usage(prompt_tokens=turn.prompt_len, completion_tokens=len(ids)),
        )
        link = None
        if line["kind"] == "merged":
            seq = trajectory.sequences[line["seq"]]
            link = Link(seq, seq.turns[-1])
        elif line.get("parent") is not None:  # a fork: its parent is known, its prompt ids are stored whole
            link = _fork_parent(trajectory, line["parent"])
        trajectory.record(
            turn,
            link=link,
            prompt_ids=line.get("prompt_ids", ()),
            env_ids=line.get("env_ids", ()),
            messages=(),
            rewritten=line["kind"] == "break",
        )
    return trajectory, contents


def _fork_parent(trajectory: Trajectory, parent: str) -> Link | None:
    for seq in trajectory.sequences:
        for turn in seq.turns:
            if turn.id == parent:
                return Link(seq, turn) if seq.turns[-1] is not turn else None
    return None


def rebuild_rows(path: str | Path) -> tuple[list[SequenceRow], SequenceStats, JournalContents]:
    """`rebuild`, as the training rows and stats the admin API would have served."""
    trajectory, contents = rebuild(path)
    return trajectory.rows(), trajectory.stats(), contents


def find_journals(paths: Sequence[str | Path]) -> Iterator[Path]:
    """Journal files among `paths` (files, or folders searched for `*.jsonl`), in name (= time) order."""
    for p in map(Path, paths):
        if p.is_dir():
            yield from sorted(p.glob("*.jsonl"))
        elif p.exists():
            yield p
        else:
            raise BadRequest(f"{p} does not exist")
