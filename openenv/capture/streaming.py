"""Real streaming: a reply's text goes to the harness as the engine samples it, in the dialect's own events.

The session hears of each sampled token (`CaptureSession.handle(on_tokens=)`, from `VLLMBackend.generate_stream`).
`TextSoFar` decodes what was sampled and keeps only the part that is surely visible content: text before
any tool-call or reasoning markup (and before a possible start of one at the end), with the whitespace the
parser would strip held back. That prefix is streamed as the dialect's text-delta events. When the turn is
done, the finished `Completion` (parsed as always: tool calls, reasoning) is rendered by the dialect's own
`sse_events`, cut at the streamed pieces' boundaries (`streamed_pieces`), and only the events not yet sent
go out. Every event the client gets is therefore one the dialect's grammar produces for the finished reply.

How one delta event is made without a grammar per dialect: the dialect renders a stub completion whose
text is that piece plus a filler piece; the events before the first text delta (the head) are found once
per reply by rendering two stubs that differ only in their first piece. A delta's only position-dependent
field is the OpenAI Responses `sequence_number`, set to its place.

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

from openenv.capture.canonical import Completion, Usage
from openenv.capture.dialects.base import Dialect, ServerSentEvent
from openenv.capture.dialects._shared import streamed_pieces
from openenv.errors import EnvError, OpenEnvError

__all__ = ["DEFAULT_KEEPALIVE_S", "TextSoFar", "keepalive_interval", "opens_reasoning", "stream_reply"]

_log = logging.getLogger(__name__)
DEFAULT_KEEPALIVE_S = 10.0
# Where visible content stops being certain: tool-call and reasoning markup of the supported formats, and
# special tokens (`<|...|>`, e.g. the end-of-turn token the parser drops).
OPENERS = ("<tool_call>", "<think>", "</think>", "<|", "<function=")
_SEQUENCE = re.compile(rb'"sequence_number":\d+')


_REASONING_TEMPLATES: dict[int, bool] = {}


def opens_reasoning(renderer: Any) -> bool:
    """Whether the chat template's generation prompt opens a `<think>` block (Qwen3-style thinking), so a
    reply's text is reasoning until `</think>`; checked once per renderer."""
    key = id(renderer)
    if key not in _REASONING_TEMPLATES:
        from openenv.capture.canonical import Message, TextPart

        try:
            prompt = renderer.full_text([Message(role="user", parts=(TextPart(text="x"),))], [])
        except Exception:  # noqa: BLE001 - a template that cannot render this is not a thinking one
            prompt = ""
        _REASONING_TEMPLATES[key] = prompt.rstrip().endswith("<think>")
    return _REASONING_TEMPLATES[key]


def keepalive_interval() -> float:
    """Seconds of silence before a keep-alive (`$OPENENV_SSE_KEEPALIVE_S`, default 10 like the reference)."""
    try:
        return max(float(os.environ.get("OPENENV_SSE_KEEPALIVE_S", DEFAULT_KEEPALIVE_S)), 0.01)
    except ValueError:
        return DEFAULT_KEEPALIVE_S


class TextSoFar:
    """The surely-visible content of a completion being sampled (see the module doc).

    Args:
        decode: ids -> text, special tokens kept (the renderer's).
        parser: the session's parser name; `llama3_json` replies that open with `{` are calls: none of it
            streams.
        thinking: the template's generation prompt opens a reasoning block, so text is reasoning until
            `</think>`: none of it streams.
    """

    def __init__(self, decode: Callable[[Sequence[int]], str], *, parser: str = "hermes",
                 thinking: bool = False) -> None:
        self._decode = decode
        self._llama = parser == "llama3_json"
        self.ids: list[int] = []
        self.visible = ""
        self.frozen = thinking  # past markup: nothing more streams until the reply is done

    def feed(self, new: Sequence[int]) -> str:
        """Take newly sampled ids; return the newly visible text ("" when none)."""
        self.ids.extend(new)
        if self.frozen:
            return ""
        text = self._decode(self.ids).rstrip("\ufffd")  # a partial UTF-8 character decodes to U+FFFD
        body = text.lstrip()
        if self._llama and body[:1] in ("{", "<"):
            self.frozen = True
            return ""
        cut = len(body)
        for opener in OPENERS:
            at = body.find(opener)
            if at >= 0:
                cut = min(cut, at)
                self.frozen = True
        tail = body[:cut]
        if not self.frozen:  # a possible start of markup at the very end waits for the next token
            for opener in OPENERS:
                for k in range(min(len(opener) - 1, len(tail)), 0, -1):
                    if tail.endswith(opener[:k]):
                        cut = min(cut, len(tail) - k)
                        break
        safe = body[:cut].rstrip()  # the parser strips the content; trailing space waits for more text
        if len(safe) <= len(self.visible) or not safe.startswith(self.visible):
            return ""
        delta, self.visible = safe[len(self.visible):], safe
        return delta


class _Events:
    """Makes one reply's streamed events with its dialect's own grammar (see the module doc)."""

    def __init__(self, dialect: Dialect, req: Any, turn_id: str, model: str, created: int, prompt_len: int) -> None:
        self.dialect, self.req = dialect, req
        self.stub = {"id": turn_id, "model": model, "created": created,
                     "usage": Usage(prompt_tokens=prompt_len, completion_tokens=0)}
        first, second = self._render(("a", "z")), self._render(("b", "z"))
        self.head_len = next(i for i, (x, y) in enumerate(zip(first, second, strict=False)) if x != y)
        self.head = first[:self.head_len]
        self.sent: list[bytes] = []
        self.pieces: list[str] = []
        # Gemini's last chunk carries the finish reason and usage, so its newest text piece waits for the next
        # (or goes out with the finished reply): a text piece already sent can never turn out to be the last.
        self.hold = dialect.name == "gemini"
        self.held: str | None = None

    def _render(self, pieces: tuple[str, ...], done: Completion | None = None) -> list[bytes]:
        done = done or Completion(**self.stub, text="".join(pieces))
        token = streamed_pieces.set(pieces)
        try:
            return [e.encode() for e in self.dialect.sse_events(done, self.req)]
        finally:
            streamed_pieces.reset(token)

    def start(self) -> list[bytes]:
        self.sent.extend(self.head)
        return list(self.head)

    def delta(self, piece: str) -> list[bytes]:
        if self.hold:
            piece, self.held = self.held, piece  # type: ignore[assignment]
            if piece is None:
                return []
        event = self._render((piece, "z"))[self.head_len]
        position = len(self.sent)
        event = _SEQUENCE.sub(b'"sequence_number":%d' % position, event)
        self.pieces.append(piece)
        self.sent.append(event)
        return [event]

    def finish(self, done: Completion) -> list[bytes]:
        """The finished reply's events that were not sent yet."""
        held = (self.held,) if self.held is not None and done.text.startswith("".join(self.pieces) + self.held) else ()
        events = self._render((*self.pieces, *held), done)
        if events[:len(self.sent)] != self.sent:
            _log.warning("turn %s: the streamed events are not a prefix of the finished reply's (text %r...); "
                         "the rest is sent as rendered", done.id, done.text[:40])
        return events[len(self.sent):]


async def stream_reply(dialect: Dialect, req: Any, handle: Callable[..., Any], *, decode: Callable[[Sequence[int]], str],
                       model: str, parser: str = "hermes", thinking: bool = False,
                       keepalive_s: float | None = None,
                       pieces: MutableMapping[str, tuple[str, ...]] | None = None,
                       key: str | None = None) -> tuple[bytes | None, AsyncIterator[bytes]]:
    """Run `handle(on_tokens=...)` and stream its reply.

    Returns (None, body) once the stream has begun (the first event or keep-alive is due), or raises the
    turn's error when it failed before that (so it becomes an ordinary error reply). `body` yields the SSE
    bytes to send.

    `pieces[key]` remembers how a streamed reply was cut into text deltas. A reply that arrives whole (a
    retry answered from the replay cache) is cut the same way, so a client that retries gets the very bytes
    of the first answer, not the same text in other chunks.
    """
    interval = keepalive_interval() if keepalive_s is None else keepalive_s
    queue: asyncio.Queue[tuple[str, int, int, list[int]]] = asyncio.Queue()
    task = asyncio.ensure_future(handle(on_tokens=lambda *item: queue.put_nowait(item)))
    text = TextSoFar(decode, parser=parser, thinking=thinking)
    state: dict[str, Any] = {"events": None, "begun": False}
    fed: list[str] = []  # the text deltas streamed, in order

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
        delta = text.feed(new)
        if delta:
            if state["events"] is None:
                state["events"] = _Events(dialect, req, tid, model, created, prompt_len)
                out += state["events"].start()
            out += state["events"].delta(delta)
            fed.append(delta)
        return out

    def on_done(completion: Completion | None) -> list[bytes]:
        if completion is None:  # the client went away and the turn was dropped: nothing left to say
            return []
        events = state["events"]
        if events is not None:
            if pieces is not None and key is not None:
                pieces[key] = tuple(fed)
            return events.finish(completion)
        cut = pieces.get(key, ()) if pieces is not None and key is not None else ()
        if not cut or not completion.text.startswith("".join(cut)):
            return [e.encode() for e in dialect.sse_events(completion, req)]
        replayed = _Events(dialect, req, completion.id, model, completion.created, completion.usage.prompt_tokens)
        out = replayed.start()
        for piece in cut:
            out += replayed.delta(piece)
        return out + replayed.finish(completion)

    def keepalive() -> bytes:
        if dialect.name == "anthropic" and state["events"] is not None:
            return b'event: ping\ndata: {"type":"ping"}\n\n'
        return b": keep-alive\n\n"

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
        for chunk in first:
            yield chunk
        if state.get("finished"):
            return
        try:
            while True:
                try:
                    kind, value = await next_item()
                except OpenEnvError as exc:
                    yield _error_event(dialect, exc)
                    return
                except Exception as exc:  # noqa: BLE001 - the stream has begun: the error goes in-band
                    yield _error_event(dialect, EnvError(f"turn failed: {type(exc).__name__}: {exc}"))
                    return
                if kind == "tokens":
                    for chunk in on_tokens(value):
                        yield chunk
                elif kind == "done":
                    for chunk in on_done(value):
                        yield chunk
                    return
                else:
                    yield keepalive()
        finally:
            if not task.done():  # the client went away: the turn still finishes and is recorded
                task.add_done_callback(_retrieve)

    return None, body()


def _retrieve(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()


def _error_event(dialect: Dialect, exc: OpenEnvError) -> bytes:
    """An error after the stream began: the dialect's error body as an event (`error` for Anthropic)."""
    _, body = dialect.error_body(exc)
    event = "error" if dialect.name == "anthropic" else None
    return ServerSentEvent(data=body.model_dump_json(), event=event).encode()
