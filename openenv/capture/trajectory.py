"""A session's turns, linked by token prefix into training sequences.

Pure bookkeeping: no I/O, no clock, no tokenizer. The session asks `find_parent` which earlier turn a
request extends, splices the prompt with `prefix_ids`, and calls `record` once the completion exists.
A turn that extends the newest turn of a sequence is appended to it (one more model span, after the
env tokens inserted between turns); anything else starts a new sequence, which records why it began
(its `origin`) and the sequence it came from (its `parent`):

- `new`: the session's first sequence;
- `fork`: the request extends an earlier turn that is not the newest of its sequence;
- `retry`: the request repeats an earlier turn's messages exactly (the harness asked again);
- `compaction`: a rewritten history with the same tools and system prompt as the sequence of the
  newest model turn (the harness summarized its history), or as an earlier sequence when the newest
  model turn called no tool (the summarizer's own request came between); the parent is the compacted
  conversation. The summary request itself is relabelled `compaction` (same parent) once the compacted
  history arrives: a one-turn, text-only sequence begun after the compacted conversation's newest turn,
  either a fork of it (Claude Code re-sends the history up to an earlier turn plus "summarize") or a
  tool-less conversation of its own (OpenCode's summarization agent, Codex's checkpoint request);
- `sub-agent`: any other rewritten history (other tools or another system prompt, e.g. the Task tool
  starting a conversation while the newest model turn waits on its tool call); its parent is the
  sequence of the newest model turn.

These rules were checked against real Claude Code, OpenCode and Codex episodes
(tests/harness/long/). Sequences store token ids once, so a 30-turn session costs its length in memory,
not its length squared.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence as Seq
from dataclasses import dataclass, field
from typing import Literal

import msgspec
from pydantic import BaseModel, ConfigDict, Field

from openenv.capture.backends.base import TokenIds
from openenv.capture.canonical import Completion, Message, Tool
from openenv.capture.logprob_mode import LogprobMode, logprob_meaning

__all__ = ["Link", "SequenceRow", "SequenceStats", "TrainingSequence", "Trajectory", "Turn", "TurnRecord"]

Source = Literal["sample", "complete"]
Origin = Literal["new", "compaction", "sub-agent", "fork", "retry"]


@dataclass(slots=True)
class Turn:
    """One answered (or failed) model request."""

    id: str
    index: int
    dialect: str
    n_messages: int
    prompt_len: int
    aux: bool = False
    source: Source | None = None
    completion: Completion | None = None
    gap: str | None = None
    sequence: int | None = None
    parent: str | None = None
    kind: Literal["merged", "new", "break", "fork"] | None = None
    text_len: int = 0
    budget: str | None = None  # the cap this request hit: answered with the final reply, not sampled
    max_tokens: int | None = (
        None  # the output budget the backend was given (the proxy's default if none asked)
    )
    # Sampling fields the request set that the trainer's policy overrode (capture/sampling_policy.py).
    overridden: tuple[str, ...] = ()
    created: int = 0  # unix seconds when the request arrived (the reply's `created`, known before it streams)
    # What the logprobs mean (capture/logprob_mode.py): the temperature sampled (or scored) at, the engine's
    # verdict, and whether they equal the trainer's log_softmax(logits / T) over the full vocabulary.
    temperature: float | None = None
    logprob_mode: LogprobMode = "unknown"
    trainable: bool = False


@dataclass(slots=True)
class TrainingSequence:
    """Consecutive turns joined token-exactly. `completion_ids` holds model and env spans.

    The four columns are typed arrays, not lists: they are a session's bulk (30k ids, 30k logprobs),
    and the garbage collector walks every item of every list on each full collection. With 1,000
    sessions open, lists made those collections 0.1-0.4 s pauses of the whole proxy, its p99; arrays are
    not walked at all, and take 8 + 8 + 1 bytes per token where lists took ~60 with their int and float
    objects (objects that also pinned allocator arenas after the sessions closed). `rows()` hands out
    lists."""

    index: int
    prompt_ids: array[int]
    completion_ids: array[int] = field(default_factory=lambda: array("q"))
    logprobs: array[float] = field(default_factory=lambda: array("d"))
    env_mask: array[int] = field(default_factory=lambda: array("b"))
    turns: list[Turn] = field(default_factory=list)
    messages: tuple[Message, ...] = ()  # the newest turn's request messages, for prefix matching
    tools: tuple[Tool, ...] = ()
    text: str = ""  # the newest turn's prompt text (kept only for templates that are not append-only)
    origin: Origin = "new"
    parent: int | None = None  # the index of the sequence this one came from
    # prompt_ids + completion_ids as JSON array items ("1,2,3"), appended to as they grow (see TokenIds)
    ids_json: bytearray = field(default_factory=bytearray)

    @property
    def head(self) -> Turn:
        return self.turns[-1]

    def end_of(self, turn: Turn) -> int:
        """Index in `completion_ids` just past `turn`'s completion."""
        return (
            turn.prompt_len - len(self.prompt_ids) + len(turn.completion.token_ids if turn.completion else ())
        )


@dataclass(frozen=True, slots=True)
class Link:
    """An earlier turn a request extends, and the message index where the new part starts."""

    sequence: TrainingSequence
    turn: Turn

    @property
    def n_messages(self) -> int:
        return self.turn.n_messages


class SequenceRow(BaseModel):
    """One training row, in the keys TRL's GRPO `rollout_func` takes (plus the turn ids)."""

    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="constants")

    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float]
    env_mask: list[int]
    turn_ids: list[str]
    origin: Origin = "new"
    parent: int | None = Field(default=None, description="index of the sequence this one came from")
    temperature: float | None = Field(
        default=None,
        description="the temperature its model turns were sampled "
        "at (None: they differ, or it is not recorded)",
    )
    logprob_mode: LogprobMode = Field(
        default="unknown",
        description="what its logprobs are: `processed` "
        "(log_softmax(logits / temperature)), `raw` (log_softmax(logits)) or "
        "`unknown` (e.g. a journal written before the mode was recorded)",
    )
    trainable: bool = Field(
        default=False,
        description="every logprob equals the trainer's "
        "log_softmax(logits / temperature) over the full vocabulary",
    )


class SequenceStats(BaseModel):
    """How well a session merged. `merge_ratio` = merged turns / turns that could have merged."""

    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="constants")

    turns: int
    sequences: int
    merged: int
    breaks: int
    forks: int
    aux: int
    gaps: int
    merge_ratio: float
    sampled_tokens: int = Field(default=0, description="completion tokens of the model turns (policy tokens)")
    aux_tokens: int = Field(default=0, description="completion tokens of aux turns (never trained)")
    malformed_tool_calls: int = Field(
        default=0,
        description="tool-call attempts of model turns that did not "
        "parse cleanly (malformed or missing their closing tag)",
    )


class TurnRecord(BaseModel):
    """A turn as the admin API and observations show it."""

    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="constants")

    id: str
    index: int
    dialect: str
    aux: bool
    source: Source | None
    gap: str | None
    sequence: int | None
    parent: str | None
    kind: str | None
    prompt_len: int
    completion: Completion | None
    budget: str | None = Field(
        default=None, description="the budget cap this request hit (answered, not sampled)"
    )
    max_tokens: int | None = None
    overridden: tuple[str, ...] = Field(
        default=(),
        description="sampling fields of the request that the trainer's "
        "policy overrode: the reply was sampled without them",
    )
    temperature: float | None = None
    logprob_mode: LogprobMode = "unknown"
    trainable: bool = False


class Trajectory:
    """All turns of one session and the sequences they form."""

    def __init__(self) -> None:
        self.turns: list[Turn] = []
        self.sequences: list[TrainingSequence] = []

    # ---- linking -----------------------------------------------------------------------------------

    def find_parent(self, messages: Seq[Message], tools: Seq[Tool]) -> Link | None:
        """The newest turn whose request messages are a prefix of `messages`, followed there by an
        assistant message (the reply the harness got), with the same tools. Heads are tried before
        older turns."""
        for seq in reversed(self.sequences):
            if seq.tools != tuple(tools):
                continue
            link = self._link_in(seq, messages)
            if link is not None:
                return link
        return None

    def _link_in(self, seq: TrainingSequence, messages: Seq[Message]) -> Link | None:
        known = seq.messages
        for turn in reversed(seq.turns):
            n = turn.n_messages
            if len(messages) > n and messages[n].role == "assistant" and _same(messages, known, n):
                return Link(seq, turn)
        return None

    def prefix_ids(self, link: Link, then: Seq[int] = ()) -> TokenIds:
        """The linked turn's prompt ids followed by its exact completion ids (and `then`, the ids of
        the new part), as views of the sequence's lists, joined only if read (`TokenIds`). Extending a
        sequence's newest ids, they come with the sequence's JSON text (`TokenIds.json`)."""
        seq = link.sequence
        end = seq.end_of(link.turn)
        whole = end == len(seq.completion_ids)
        if not whole:
            return TokenIds(seq.prompt_ids, seq.completion_ids[:end], then)
        return TokenIds(
            seq.prompt_ids,
            seq.completion_ids,
            then,
            buffer=seq.ids_json,
            length=len(seq.ids_json),
            tail=_json_items(then),
        )

    def is_head(self, link: Link) -> bool:
        return link.sequence.turns[-1] is link.turn

    @property
    def has_model_turns(self) -> bool:
        return any(t.sequence is not None for t in self.turns)

    # ---- recording ---------------------------------------------------------------------------------

    def add(self, turn: Turn) -> Turn:
        """Register a turn before it is answered, so its index is fixed in arrival order."""
        turn.index = len(self.turns)
        self.turns.append(turn)
        return turn

    def record(
        self,
        turn: Turn,
        *,
        link: Link | None,
        prompt_ids: Seq[int],
        env_ids: Seq[int],
        messages: tuple[Message, ...],
        tools: tuple[Tool, ...] = (),
        text: str = "",
        rewritten: bool = False,
    ) -> None:
        """Attach a finished turn to a sequence.

        Args:
            turn: the turn, with `completion` set.
            link: the turn it extends, or None.
            prompt_ids: its full prompt ids.
            env_ids: the ids between the linked turn's completion and this completion.
            messages: its request messages.
            tools: its request tools.
            text: its prompt text (for templates that are not append-only).
            rewritten: no earlier turn could be extended because history changed (a break).
        """
        assert turn.completion is not None
        if link is not None and self.is_head(link):
            seq = link.sequence
            turn.kind = "merged"
            seq.completion_ids.extend(env_ids)
            seq.logprobs.frombytes(bytes(seq.logprobs.itemsize * len(env_ids)))  # zeros: 0.0
            seq.env_mask.frombytes(bytes(len(env_ids)))
            _append_json(seq.ids_json, env_ids)
        else:
            origin, parent = self._lineage(link, messages, tools)
            first = list(prompt_ids)
            seq = TrainingSequence(
                index=len(self.sequences), prompt_ids=array("q", first), origin=origin, parent=parent
            )
            _append_json(seq.ids_json, first)
            self.sequences.append(seq)
            turn.kind = "fork" if link is not None else ("break" if rewritten else "new")
        turn.parent = link.turn.id if link is not None else None
        turn.sequence = seq.index
        turn.text_len = len(text)
        done = turn.completion
        seq.completion_ids.extend(done.token_ids)
        _append_json(seq.ids_json, done.token_ids)
        seq.logprobs.extend(done.logprobs)
        seq.env_mask.frombytes(b"\x01" * len(done.token_ids))
        seq.turns.append(turn)
        seq.messages = messages
        seq.tools = tools
        seq.text = text

    def _lineage(
        self, link: Link | None, messages: Seq[Message], tools: Seq[Tool]
    ) -> tuple[Origin, int | None]:
        """Why a new sequence begins and the index of the sequence it came from (see the module doc)."""
        if link is not None:
            return "fork", link.sequence.index
        if not self.sequences:
            return "new", None
        for seq in reversed(self.sequences):
            for turn in seq.turns:
                if (
                    turn.n_messages == len(messages)
                    and seq.tools == tuple(tools)
                    and _asked(turn, seq, messages)
                ):
                    return "retry", seq.index
        same = [
            q for q in self.sequences if q.tools == tuple(tools) and _system(q.messages) == _system(messages)
        ]
        latest = max(self.sequences, key=lambda q: q.head.index)  # the sequence of the newest model turn
        if any(q is latest for q in same):
            compacted = latest
        elif same and not _calls_tools(latest.head):
            compacted = max(same, key=lambda q: q.head.index)
        else:
            return "sub-agent", latest.index
        while (
            compacted.origin in ("fork", "retry")
            and compacted.parent is not None
            and _summary_like(compacted)
        ):
            compacted = self.sequences[
                compacted.parent
            ]  # the summary request forked it: go to the conversation
        for q in self.sequences:  # the summary request(s) of this compaction
            if (
                q.parent == compacted.index
                and _summary_like(q)
                and q.head.index > compacted.head.index
                and (q.origin in ("fork", "retry") or (q.origin == "sub-agent" and not q.tools))
            ):
                q.origin = "compaction"
        return "compaction", compacted.index

    # ---- export ------------------------------------------------------------------------------------

    def rows(self) -> list[SequenceRow]:
        return [
            SequenceRow(
                prompt_ids=s.prompt_ids.tolist(),
                completion_ids=s.completion_ids.tolist(),
                logprobs=s.logprobs.tolist(),
                env_mask=s.env_mask.tolist(),
                turn_ids=[t.id for t in s.turns],
                origin=s.origin,
                parent=s.parent,
                **logprob_meaning(s.turns),
            )
            for s in self.sequences
        ]

    def stats(self) -> SequenceStats:
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
            sampled_tokens=sum(_completion_len(t) for t in model),
            aux_tokens=sum(_completion_len(t) for t in self.turns if t.aux),
            malformed_tool_calls=sum(
                a.status != "parsed" for t in model if t.completion for a in t.completion.call_attempts
            ),
        )

    def records(self) -> list[TurnRecord]:
        return [
            TurnRecord(
                id=t.id,
                index=t.index,
                dialect=t.dialect,
                aux=t.aux,
                source=t.source,
                gap=t.gap,
                sequence=t.sequence,
                parent=t.parent,
                kind=t.kind,
                prompt_len=t.prompt_len,
                completion=t.completion,
                budget=t.budget,
                max_tokens=t.max_tokens,
                overridden=t.overridden,
                temperature=t.temperature,
                logprob_mode=t.logprob_mode,
                trainable=t.trainable,
            )
            for t in self.turns
        ]


def _completion_len(turn: Turn) -> int:
    return len(turn.completion.token_ids) if turn.completion is not None else 0


def _json_items(ids: Seq[int]) -> bytes:
    """`ids` as the items of a JSON array, without the brackets."""
    return msgspec.json.encode(ids)[1:-1] if ids else b""


def _append_json(buffer: bytearray, ids: Seq[int]) -> None:
    if ids:
        if buffer:
            buffer += b","
        buffer += _json_items(ids)


def _calls_tools(turn: Turn) -> bool:
    return turn.completion is not None and bool(turn.completion.tool_calls)


def _summary_like(seq: TrainingSequence) -> bool:
    """One turn that answered in text only: the shape of a summary request."""
    return len(seq.turns) == 1 and not _calls_tools(seq.head)


def _system(messages: Seq[Message]) -> tuple[Message, ...]:
    """The leading system messages (a conversation's identity: an agent and its sub-agents differ here)."""
    lead = []
    for m in messages:
        if m.role != "system":
            break
        lead.append(m)
    return tuple(lead)


def _asked(turn: Turn, seq: TrainingSequence, messages: Seq[Message]) -> bool:
    """Whether `turn` (of `seq`) was asked with exactly `messages`. Only the newest turn's messages are
    kept whole; an older turn's are the prefix of them up to its own count."""
    return _same(messages, seq.messages, turn.n_messages)


def _same(messages: Seq[Message], known: Seq[Message], n: int) -> bool:
    """Whether the first `n` messages are equal. A resent history is mostly the same objects (the
    dialects convert each item once), which tuple comparison passes without calling `__eq__`."""
    if len(known) < n:
        return False
    return tuple(messages[:n]) == tuple(known[:n])  # a C loop that skips identical items
