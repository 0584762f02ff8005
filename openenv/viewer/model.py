"""The viewer's model of one episode: what each turn asked and answered, and every training token.

Pure: the only outside input is `decode`, which maps one token id to its text, so tests and the app can
use the model's own tokenizer while this module never imports one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict

from openenv.capture.canonical import Message, ThinkingPart, ToolCallPart, ToolResultPart
from openenv.capture.trajectory import SequenceRow, SequenceStats, TurnRecord
from openenv.errors import TransportError
from openenv.export.log import EpisodeLog

__all__ = [
    "Decode",
    "EpisodeView",
    "MessageView",
    "SequenceView",
    "TokenView",
    "TurnView",
    "build_view",
    "lineage_order",
    "load_proxy_session",
    "logprob_colour",
]

Decode = Callable[[int], str]


class _View(BaseModel):
    model_config = ConfigDict(extra="forbid")


class MessageView(_View):
    """One message, flattened for display: text, reasoning, tool calls and a tool result."""

    role: str
    text: str = ""
    reasoning: str = ""
    tool_calls: list[ToolCallPart] = []
    tool_result: ToolResultPart | None = None


class TurnView(_View):
    """A turn: the messages it added to the conversation, and the reply."""

    index: int
    id: str
    kind: str | None
    source: str | None
    aux: bool
    gap: str | None
    sequence: int | None
    prompt_len: int
    new_messages: list[MessageView]
    reply: MessageView | None
    completion_tokens: int


class TokenView(_View):
    text: str
    logprob: float
    env: bool  # env_mask 0: inserted between turns (tool results, templates), never trained on
    colour: str


class SequenceView(_View):
    index: int
    prompt_len: int
    prompt_text: str
    tokens: list[TokenView]
    model_tokens: int
    env_tokens: int
    turn_ids: list[str]
    origin: str = "new"
    parent: int | None = None
    depth: int = 0  # in the lineage tree (a root is 0)


class EpisodeView(_View):
    """Everything the page shows about one episode."""

    name: str
    harness: str
    task: str
    policy: str
    reward: float | None
    reward_breakdown: dict[str, float]
    stats: SequenceStats
    turns: list[TurnView]
    sequences: list[SequenceView]
    lineage: list[SequenceView] = []  # the sequences in tree order (each after its parent), with depth
    tokens_sampled: int = 0  # policy tokens the turns sampled (aux excluded)
    tokens_trained: int = 0  # policy tokens in the sequences (env_mask 1)
    aux_tokens: int = 0

    @property
    def trained_ratio(self) -> float:
        return self.tokens_trained / self.tokens_sampled if self.tokens_sampled else 1.0


def logprob_colour(logprob: float) -> str:
    """Green for confident tokens (logprob near 0) through yellow to red (logprob -8 or below)."""
    confidence = max(0.0, min(1.0, 1.0 + logprob / 8.0))
    return f"hsl({round(120 * confidence)}, 70%, 82%)"


def _message(message: Message) -> MessageView:
    result = next((p for p in message.parts if isinstance(p, ToolResultPart)), None)
    return MessageView(
        role=message.role,
        text=message.text(),
        reasoning="".join(p.text for p in message.parts if isinstance(p, ThinkingPart)),
        tool_calls=message.tool_calls(),
        tool_result=result,
    )


def _turn(record: TurnRecord, log: EpisodeLog, seen: int) -> tuple[TurnView, int]:
    request = log.requests.get(record.id)
    messages = list(request.messages) if request else []
    done = record.completion
    reply = (
        None
        if done is None
        else MessageView(
            role="assistant", text=done.text, reasoning=done.reasoning, tool_calls=list(done.tool_calls)
        )
    )
    view = TurnView(
        index=record.index,
        id=record.id,
        kind=record.kind,
        source=record.source,
        aux=record.aux,
        gap=record.gap,
        sequence=record.sequence,
        prompt_len=record.prompt_len,
        new_messages=[_message(m) for m in messages[seen:]],
        reply=reply,
        completion_tokens=len(done.token_ids) if done else 0,
    )
    return view, (len(messages) if request and not record.aux else seen)


def _sequence(index: int, row: SequenceRow, decode: Decode) -> SequenceView:
    tokens = [
        TokenView(text=decode(t), logprob=lp, env=not mask, colour="" if not mask else logprob_colour(lp))
        for t, lp, mask in zip(row.completion_ids, row.logprobs, row.env_mask, strict=True)
    ]
    model = sum(row.env_mask)
    return SequenceView(
        index=index,
        prompt_len=len(row.prompt_ids),
        prompt_text="".join(decode(t) for t in row.prompt_ids),
        tokens=tokens,
        model_tokens=model,
        env_tokens=len(row.env_mask) - model,
        turn_ids=row.turn_ids,
        origin=row.origin,
        parent=row.parent,
    )


def lineage_order(sequences: list[SequenceView]) -> list[SequenceView]:
    """The sequences depth-first from each root (a sequence without a known parent), children in index
    order, each with its `depth` set: the tree `openenv view` draws."""
    known = {s.index for s in sequences}
    children: dict[int | None, list[SequenceView]] = {}
    for s in sequences:
        children.setdefault(s.parent if s.parent in known and s.parent != s.index else None, []).append(s)
    ordered: list[SequenceView] = []
    stack = [(s, 0) for s in reversed(children.get(None, []))]
    while stack:
        node, depth = stack.pop()
        ordered.append(node.model_copy(update={"depth": depth}))
        stack.extend((c, depth + 1) for c in reversed(children.get(node.index, [])))
    return ordered


def build_view(log: EpisodeLog, decode: Decode) -> EpisodeView:
    """The page model of one episode. Turns show only the messages added since the previous main turn."""
    turns, seen = [], 0
    for record in sorted(log.turns, key=lambda r: r.index):
        view, seen = _turn(record, log, seen)
        turns.append(view)
    s = log.summary
    sequences = [_sequence(i, row, decode) for i, row in enumerate(log.sequences)]
    sampled = [t for t in log.turns if t.completion is not None and t.sequence is not None and not t.aux]
    return EpisodeView(
        name=log.name,
        harness=s.harness if s else "",
        task=s.task if s else "",
        policy=s.policy if s else "",
        reward=s.reward if s else None,
        reward_breakdown=s.reward_breakdown if s else {},
        stats=log.stats(),
        turns=turns,
        sequences=sequences,
        lineage=lineage_order(sequences),
        tokens_sampled=sum(len(t.completion.token_ids) for t in sampled if t.completion),
        tokens_trained=sum(q.model_tokens for q in sequences),
        aux_tokens=sum(len(t.completion.token_ids) for t in log.turns if t.aux and t.completion),
    )


def load_proxy_session(
    proxy_url: str, token: str, *, admin_key: str | None = None, client: httpx.Client | None = None
) -> EpisodeLog:
    """Read a live capture session through the proxy's admin API (`/sessions/{token}/...`).

    Args:
        admin_key: the proxy's admin key when it has one (`openenv proxy --admin-key`).

    Raises:
        TransportError: the proxy did not answer, or answered with an error.
    """
    headers = {"authorization": f"Bearer {admin_key}"} if admin_key else {}
    http = client or httpx.Client(timeout=10.0, headers=headers)
    base = proxy_url.rstrip("/")
    try:
        turns = _get(http, f"{base}/sessions/{token}/trajectory")["turns"]
        rows = _get(http, f"{base}/sessions/{token}/sequences")["sequences"]
    finally:
        if client is None:
            http.close()
    return EpisodeLog(
        name=f"session {token[:8]}",
        turns=[TurnRecord.model_validate(t) for t in turns],
        sequences=[SequenceRow.model_validate(r) for r in rows],
    )


def _get(http: httpx.Client, url: str) -> dict[str, Any]:
    try:
        response = http.get(url)
    except httpx.HTTPError as exc:
        raise TransportError(f"the capture proxy did not answer {url}: {exc}") from None
    if response.status_code != 200:
        raise TransportError(
            f"the capture proxy answered {response.status_code} for {url}: {response.text[:200]}"
        )
    return response.json()
