"""Real streaming: a reply goes to the harness as the engine samples it, in the dialect's own events.

The session hears of each sampled token (`CaptureSession.handle(on_tokens=)`, from `VLLMBackend.generate_stream`).
`ReplySoFar` decodes what was sampled and keeps only what no later token can change: the reasoning of a
reply that opened `<think>`, and the visible content before any tool-call markup (and before a possible
start of one at the end), with the whitespace the parser would strip and a trailing end-of-turn token held
back. Those
pieces go out as the dialect's reasoning and text deltas (Chat `reasoning_content`/`content`, Anthropic
`thinking_delta`/`text_delta`, Responses `reasoning_text`/`output_text` deltas, Gemini `thought` and text
parts). When the turn is done, the finished `Completion` (parsed as always) is rendered by the dialect's
own `sse_events`, cut at the streamed pieces' boundaries (`streamed_pieces`), and only the events not yet
sent go out. Every event the client gets is therefore one the dialect's grammar produces for the finished
reply.

How events are made without a grammar per dialect: the head every reply starts with (Chat's role chunk,
Anthropic's `message_start` and `ping`, Responses' `created`/`in_progress`) is the common start of a text,
a reasoning and a tool-call stub render, and goes out at the first sampled token, as vLLM's own streams
do. When a channel starts, two stub renders that differ only in its first piece give the events that lead
to its first delta (a block start, the end of the reasoning block) and the delta's place; one render with a
marker character as the piece is that channel's delta template, each piece put in as JSON. A delta's only
position-dependent field is the Responses `sequence_number`, set to its place.

Tool-call arguments are not streamed: a call is certain only once its block closes (the parser keeps a
malformed one as text) and the dialects put all text before the calls, so its events go out with the
finished reply.

Keep-alive: while no event is due (a slow engine, a gated turn waiting on its controller), the stream sends
an SSE comment every `keepalive_s` seconds, and Anthropic's `ping` event once its message has started,
as the reference proxy and Anthropic's API do. The HTTP reply starts at the first event or at the first
keep-alive, whichever comes first; a failure before then is an ordinary error reply in the dialect's
format, and after it an in-stream error event.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
from collections.abc import AsyncIterator, Callable, MutableMapping, Sequence
from typing import Any

from pydantic_core import to_json

from openenv.capture.canonical import Completion, ToolCallPart, Usage
from openenv.capture.dialects._shared import streamed_pieces
from openenv.capture.dialects.base import KEEPALIVE, Dialect, ServerSentEvent
from openenv.capture.gate import mark_retrieved
from openenv.capture.parsers.base import split_reasoning
from openenv.errors import EnvError, OpenEnvError

__all__ = ["DEFAULT_KEEPALIVE_S", "ReplySoFar", "keepalive_interval", "opens_reasoning", "stream_reply"]

_log = logging.getLogger(__name__)
DEFAULT_KEEPALIVE_S = 10.0
OPEN, CLOSE = "<think>", "</think>"
# Where visible content stops being certain: tool-call and reasoning markup of the supported formats, and
# special tokens (`<|...|>`, e.g. the end-of-turn token the parser drops).
OPENERS = ("<tool_call>", OPEN, CLOSE, "<|", "<function=")
# Parsers whose markup never starts with `<|`: for them a special token other than the trailing end-of-turn
# (which `Renderer.completion_text` drops, and which is held back here until another token follows it) is
# content like any other text, and the text after it keeps streaming.
_PLAIN_SPECIALS = frozenset({"hermes", "qwen3_coder"})
_CONTEXT, _STEP = 4, 32  # incremental decoding: ids of context, ids between checks against a full decode
_SEQUENCE = re.compile(rb'"sequence_number":\d+')
# A delta event is rendered once per reply and channel with this character as its piece; each piece is then
# put in its place as JSON (a private-use character: no model text is ever mistaken for it in a template).
_MARK = "\ue000"
_MARK_JSON = to_json(_MARK)[1:-1]

Delta = tuple[str, str]  # (channel, piece): channel "reasoning" or "text"


_REASONING_TEMPLATES: dict[int, bool] = {}


def opens_reasoning(renderer: Any) -> bool:
    """Whether the chat template's generation prompt opens a `<think>` block (Qwen3-style thinking), so a
    reply's text is reasoning until `</think>`; checked once per renderer."""
    key = id(renderer)
    if key not in _REASONING_TEMPLATES:
        from openenv.capture.canonical import Message, TextPart

        try:
            prompt = renderer.full_text([Message(role="user", parts=(TextPart(text="x"),))], [])
        except Exception:
            prompt = ""
        _REASONING_TEMPLATES[key] = prompt.rstrip().endswith(OPEN)
    return _REASONING_TEMPLATES[key]


def keepalive_interval() -> float:
    """Seconds of silence before a keep-alive (`$OPENENV_SSE_KEEPALIVE_S`, default 10 like the reference)."""
    try:
        return max(float(os.environ.get("OPENENV_SSE_KEEPALIVE_S", DEFAULT_KEEPALIVE_S)), 0.01)
    except ValueError:
        return DEFAULT_KEEPALIVE_S


def _held_back(text: str, openers: Sequence[str]) -> str:
    """`text` without a trailing possible start of any of `openers` (it waits for the next token)."""
    cut = len(text)
    for opener in openers:
        for k in range(min(len(opener) - 1, len(text)), 0, -1):
            if text.endswith(opener[:k]):
                cut = min(cut, len(text) - k)
                break
    return text[:cut]


class ReplySoFar:
    """The surely-final reasoning and visible content of a completion being sampled (see the module doc).

    The parser (`split_reasoning`, then the tool-call blocks) decides what the finished reply says; this
    class hands out only what no later token can change:
    - reasoning, when the reply opens with `<think>`: its text as it comes (without a trailing possible
      `</think>` start or whitespace, which the parser strips). When the template's generation prompt opened
      the block (`thinking`), the text is reasoning only if `</think>` comes (else the parser calls it content),
      so it goes out whole when `</think>` does;
    - content, after the reasoning (or from the start): text before any tool-call, reasoning or `<|` markup
      and before a possible start of one at the end, trailing whitespace held. Past markup nothing more
      streams (the finished reply's render sends the rest).

    Args:
        decode: ids -> text, special tokens kept (the renderer's).
        parser: the session's parser name; `llama3_json` replies that open with `{` are calls: none of their
            content streams.
        thinking: the template's generation prompt opens a reasoning block.
        eos_ids: the end-of-turn ids the renderer drops from the end of a completion. Given, and with a
            parser whose markup never starts with `<|` (hermes, qwen3_coder), other special tokens stream
            as the content they are; without them any `<|` stops the content.
    """

    def __init__(
        self,
        decode: Callable[[Sequence[int]], str],
        *,
        parser: str = "hermes",
        thinking: bool = False,
        eos_ids: frozenset[int] | None = None,
    ) -> None:
        self._decode = decode
        self._llama = parser == "llama3_json"
        self._thinking = thinking
        self._eos = eos_ids or frozenset()
        # Incremental decoding (see `_text`): the text of ids[:_stable_n], checked against a full decode.
        self._stable, self._stable_n, self._whole = "", 0, False
        self._openers = (
            tuple(o for o in OPENERS if o != "<|") if eos_ids and parser in _PLAIN_SPECIALS else OPENERS
        )
        self.ids: list[int] = []
        self.streamed = {"reasoning": "", "text": ""}
        self.phase = "start"  # start | reasoning | text | frozen
        self._text_from = 0  # where the content begins in the decoded text (after `</think>`)

    @property
    def frozen(self) -> bool:
        return self.phase == "frozen"

    def feed(self, new: Sequence[int]) -> list[Delta]:
        """Take newly sampled ids; return the newly certain pieces, in order (none most of the time when
        frozen)."""
        self.ids.extend(new)
        if self.phase == "frozen":
            return []
        end = len(self.ids)
        while end and self.ids[end - 1] in self._eos:  # dropped if it stays the last: held until it is not
            end -= 1
        raw = self._text(end).rstrip("\ufffd")  # a partial UTF-8 character decodes to U+FFFD
        out: list[Delta] = []
        if self.phase == "start":
            head = raw.lstrip()
            if self._thinking or head.startswith(OPEN):
                self.phase = "reasoning"
            elif OPEN.startswith(head):
                return out  # nothing yet, or a possible `<think>` start
            else:
                self.phase = "text"
        if self.phase == "reasoning":
            if CLOSE in raw:
                reasoning, rest = split_reasoning(raw)
                out += self._grow("reasoning", reasoning)
                if self.phase == "frozen":
                    return out
                self.phase, self._text_from = "text", len(raw) - len(rest)
            elif self._thinking:
                return out  # reasoning only if `</think>` comes: nothing is certain yet
            else:
                body = raw.lstrip()[len(OPEN) :]
                return out + self._grow("reasoning", _held_back(body, (CLOSE,)).strip())
        body = raw[self._text_from :].lstrip()
        if self._llama and body[:1] in ("{", "<"):
            self.phase = "frozen"
            return out
        cut = len(body)
        for opener in self._openers:
            at = body.find(opener)
            if at >= 0:
                cut = min(cut, at)
                self.phase = "frozen"
        safe = body[:cut] if self.phase == "frozen" else _held_back(body, self._openers)
        grown = self._grow("text", safe.rstrip())  # the parser strips the content; trailing space waits
        return out + grown

    def _text(self, end: int) -> str:
        """`decode(ids[:end])` without decoding all of them every token (a 4k-token reasoning decoded whole
        per token cost seconds of CPU): the text of a checked prefix plus the newer ids decoded with a few
        ids of context before them, as vLLM's incremental detokenizer does. The prefix moves on every
        `_STEP` ids, only where a full decode agrees with it; a tokenizer that ever disagrees is decoded
        whole from then on."""
        if self._whole:
            return self._decode(self.ids[:end])
        start = max(self._stable_n - _CONTEXT, 0)
        context = self._decode(self.ids[start : self._stable_n]) if self._stable_n else ""
        tail = self._decode(self.ids[start:end])
        if not tail.startswith(context):
            self._whole = True
            return self._decode(self.ids[:end])
        text = self._stable + tail[len(context) :]
        if end - self._stable_n >= _STEP and not text.endswith("\ufffd"):
            full = self._decode(self.ids[:end])
            if full != text:
                self._whole = True
                return full
            self._stable, self._stable_n = text, end
        return text

    def _grow(self, channel: str, value: str) -> list[Delta]:
        before = self.streamed[channel]
        if len(value) <= len(before):
            return []
        if not value.startswith(before):  # cannot happen with the rules above; never send a contradiction
            _log.warning(
                "streamed %s %r... is not a prefix of %r...; streaming stops",
                channel,
                before[:40],
                value[:40],
            )
            self.phase = "frozen"
            return []
        frozen, self.phase = self.phase == "frozen", self.phase
        self.streamed[channel] = value
        if frozen:
            self.phase = "frozen"
        return [(channel, value[len(before) :])]


class _Events:
    """Makes one reply's streamed events with its dialect's own grammar (see the module doc).

    `head` (sent at the first sampled token) is what every reply starts with, text, reasoning or tool
    call alike; each channel's first delta brings the events between what was sent and that delta (a
    block start, the end of the reasoning block), found by diffing two stub renders that differ only in
    that piece. Deltas are made from one rendered template per channel."""

    def __init__(
        self, dialect: Dialect, req: Any, turn_id: str, model: str, created: int, prompt_len: int
    ) -> None:
        self.dialect, self.req = dialect, req
        self.stub = {
            "id": turn_id,
            "model": model,
            "created": created,
            "usage": Usage(prompt_tokens=prompt_len, completion_tokens=0),
        }
        call = ToolCallPart(id=f"call_{turn_id}_0", name="f", arguments="{}")
        renders = [
            self._render({"text": ("a", "z")}),
            self._render({"reasoning": ("a", "z")}),
            self._render({}, Completion(**self.stub, tool_calls=(call,), finish_reason="tool_calls")),
        ]
        self.head = renders[0][: min(_common(renders[0], other) for other in renders[1:])]
        self.made: list[bytes] = []  # every event made: sent, and (Gemini) the newest one held back
        self.pieces: dict[str, list[str]] = {"reasoning": [], "text": []}
        self.order: list[Delta] = []
        self.channel: str | None = None
        self.template = b""
        self._base: dict[str, tuple[str, ...]] = {}
        self._at = 0
        # Gemini's last chunk carries the finish reason and usage, so its newest event waits for the next
        # (or goes out with the finished reply): an event already sent can never turn out to be the last.
        self.hold = dialect.stream_style.holds_last
        self.sent_n = 0

    def _render(self, pieces: dict[str, tuple[str, ...]], done: Completion | None = None) -> list[bytes]:
        if done is None:
            done = Completion(
                **self.stub,
                text="".join(pieces.get("text", ())),
                reasoning="".join(pieces.get("reasoning", ())),
            )
        token = streamed_pieces.set(pieces)
        try:
            return [e.encode() for e in self.dialect.sse_events(done, self.req)]
        finally:
            streamed_pieces.reset(token)

    def _so_far(self) -> dict[str, tuple[str, ...]]:
        return {k: tuple(v) for k, v in self.pieces.items() if v}

    def _out(self, events: list[bytes]) -> list[bytes]:
        """Record `events` as made; return those to send now (all but a held newest one)."""
        self.made.extend(events)
        keep = len(self.made) - (1 if self.hold and self.made else 0)
        out, self.sent_n = self.made[self.sent_n : keep], max(self.sent_n, keep)
        return out

    def start(self) -> list[bytes]:
        return self._out(list(self.head))

    def delta(self, channel: str, piece: str) -> list[bytes]:
        opened = self._open(channel, piece) if channel != self.channel else []
        if self.template:
            event = self.template.replace(_MARK_JSON, to_json(piece)[1:-1], 1)
        else:  # the rare dialect whose delta has no single place for the piece: rendered in full
            event = self._render({**self._base, channel: (piece, "z")})[self._at]
        if b'"sequence_number":' in event:
            event = _SEQUENCE.sub(b'"sequence_number":%d' % (len(self.made) + len(opened)), event)
        self.pieces[channel].append(piece)
        self.order.append((channel, piece))
        return self._out([*opened, event])

    def _open(self, channel: str, piece: str) -> list[bytes]:
        """`channel` starts: the events between those made and its first delta; its delta template."""
        self._base = self._so_far()
        first = self._render({**self._base, channel: (piece, "z")})
        self._at = _common(first, self._render({**self._base, channel: (piece + "y", "z")}))
        if first[: len(self.made)] != self.made:
            _log.warning(
                "the events made so far are not a prefix of the %s channel's (%r...)", channel, piece[:40]
            )
        self.channel = channel
        template = self._render({**self._base, channel: (_MARK, "z")})[self._at]
        filled = template.replace(_MARK_JSON, to_json(piece)[1:-1], 1)
        ok = template.count(_MARK_JSON) == 1 and filled == first[self._at]
        self.template = template if ok else b""
        return first[len(self.made) : self._at]

    def finish(self, done: Completion) -> list[bytes]:
        """The finished reply's events that were not sent yet."""
        events = self._render(self._so_far(), done)
        if events[: self.sent_n] != self.made[: self.sent_n]:
            _log.warning(
                "turn %s: the streamed events are not a prefix of the finished reply's (text %r...); "
                "the rest is sent as rendered",
                done.id,
                done.text[:40],
            )
        return events[self.sent_n :]


def _common(a: Sequence[bytes], b: Sequence[bytes]) -> int:
    """How many leading events `a` and `b` share."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


async def stream_reply(
    dialect: Dialect,
    req: Any,
    handle: Callable[..., Any],
    *,
    decode: Callable[[Sequence[int]], str],
    model: str,
    parser: str = "hermes",
    thinking: bool = False,
    eos_ids: frozenset[int] | None = None,
    keepalive_s: float | None = None,
    pieces: MutableMapping[str, tuple[Delta, ...]] | None = None,
    key: str | None = None,
) -> tuple[bytes | None, AsyncIterator[bytes]]:
    """Run `handle(on_tokens=...)` and stream its reply.

    Returns (None, body) once the stream has begun (the first event or keep-alive is due), or raises the
    turn's error when it failed before that (so it becomes an ordinary error reply). `body` yields the SSE
    bytes to send.

    `pieces[key]` remembers how a streamed reply was cut into deltas. A reply that arrives whole (a retry
    answered from the replay cache) is cut the same way, so a client that retries gets the very bytes of the
    first answer, not the same text in other chunks.
    """
    interval = keepalive_interval() if keepalive_s is None else keepalive_s
    queue: asyncio.Queue[tuple[str, int, int, list[int]]] = asyncio.Queue()
    task = asyncio.ensure_future(handle(on_tokens=lambda *item: queue.put_nowait(item)))
    so_far = ReplySoFar(decode, parser=parser, thinking=thinking, eos_ids=eos_ids)
    state: dict[str, Any] = {"events": None}

    async def next_item() -> tuple[str, Any]:
        """('tokens', item) | ('done', completion) | ('idle', None) after `interval` of silence."""
        if not queue.empty():
            return "tokens", queue.get_nowait()
        getter = asyncio.ensure_future(queue.get())
        done, _ = await asyncio.wait({getter, task}, timeout=interval, return_when=asyncio.FIRST_COMPLETED)
        if getter in done:
            return "tokens", getter.result()
        getter.cancel()
        if task in done:
            return "done", task.result()  # raises the turn's error
        return "idle", None

    def on_tokens(item: tuple[str, int, int, list[int]]) -> list[bytes]:
        tid, created, prompt_len, new = item
        out: list[bytes] = []
        events = state["events"]
        if events is None:  # the first sampled token: the head every reply starts with goes out now
            events = state["events"] = _Events(dialect, req, tid, model, created, prompt_len)
            out += events.start()
        for channel, piece in so_far.feed(new):
            out += events.delta(channel, piece)
        return out

    def on_done(completion: Completion | None) -> list[bytes]:
        if completion is None:  # the client went away and the turn was dropped: nothing left to say
            return []
        events = state["events"]
        if events is not None:
            if pieces is not None and key is not None:
                pieces[key] = tuple(events.order)
            return events.finish(completion)
        cut = pieces.get(key, ()) if pieces is not None and key is not None else ()
        if not cut:
            return [e.encode() for e in dialect.sse_events(completion, req)]
        replayed = _Events(
            dialect, req, completion.id, model, completion.created, completion.usage.prompt_tokens
        )
        out = replayed.start()
        for channel, piece in cut:
            out += replayed.delta(channel, piece)
        return out + replayed.finish(completion)

    def keepalive() -> bytes:
        return dialect.stream_style.ping if state["events"] is not None else KEEPALIVE

    # Wait for the first thing to send: a failure before it is a plain error reply.
    first: list[bytes] = []
    while not first:
        kind, value = await next_item()
        if kind == "tokens":
            first = on_tokens(value)
        elif kind == "done":
            first = on_done(value) or [b""]
            state["finished"] = True
        else:
            first = [keepalive()]

    async def body() -> AsyncIterator[bytes]:
        # One write per batch of events: the tokens that queued up while the last batch went out are
        # turned into events together (fewer syscalls and loop turns when the engine is faster than us).
        yield b"".join(first)
        if state.get("finished"):
            return
        try:
            while True:
                try:
                    kind, value = await next_item()
                except OpenEnvError as exc:
                    yield _error_event(dialect, exc)
                    return
                except Exception as exc:
                    yield _error_event(dialect, EnvError(f"turn failed: {type(exc).__name__}: {exc}"))
                    return
                if kind == "tokens":
                    out = on_tokens(value)
                    while not queue.empty():
                        out += on_tokens(queue.get_nowait())
                    if out:
                        yield b"".join(out)
                elif kind == "done":
                    yield b"".join(on_done(value))
                    return
                else:
                    yield keepalive()
        finally:
            if not task.done():  # the client went away: the turn still finishes and is recorded
                task.add_done_callback(mark_retrieved)

    return None, body()


def _error_event(dialect: Dialect, exc: OpenEnvError) -> bytes:
    """An error after the stream began: the dialect's error body as an event (`error` for Anthropic)."""
    _, body = dialect.error_body(exc)
    return ServerSentEvent(data=body.model_dump_json(), event=dialect.stream_style.error_event).encode()
