"""Rendering canonical requests to prompt token ids with the model's own chat template.

Two ways to get a turn's prompt ids:
- `full_prompt`: render the whole conversation and tokenize it (a session's first turn, or after a
  history rewrite).
- `suffix_ids`: when a request extends an earlier turn, render only the new messages and tokenize
  only them. The caller splices: earlier prompt ids + exact sampled ids + these ids. Nothing earlier
  is re-tokenized, and the cost of a turn does not grow with the conversation.

The suffix is rendered behind a short fixed anchor conversation and cut out of it. That is exact only
for templates that never rewrite earlier turns and whose rendering of a message does not depend on
what came long before it; `Renderer` probes its template for both at start-up (`append_only`). For a
template that fails the probe (Qwen3 drops old `<think>` blocks once a new user message arrives) each
extending turn renders the full conversation and checks that the earlier prompt text is still a
prefix; when it is not, the caller starts a new sequence and counts a break.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar

from jinja2 import TemplateError
from transformers.utils.chat_template_utils import render_jinja_template

from openenv.capture.canonical import Message, TextPart, ThinkingPart, Tool, ToolCallPart, ToolResultPart
from openenv.capture.fast_paths import fast_paths
from openenv.capture.word_encoder import WordEncoder
from openenv.errors import BadRequest

__all__ = ["Renderer", "after_reply", "template_messages", "template_tools"]

_ANCHOR: list[dict[str, Any]] = [{"role": "system", "content": "."}, {"role": "user", "content": "."}]
_SENTINEL = "\u2063sentinel\u2063"
_HEAD_CACHE = 64  # distinct system+tools blocks kept (one or two per harness)
_SUFFIX_CACHE = 1024  # distinct new-message suffixes kept (rendered text and ids), shared by sessions
# The caches are bounded in bytes too: a count bound let one client's 3 MiB messages pin ~26 MB each.
_CACHE_BYTES = 64 << 20  # estimated bytes each cache may hold
_ENTRY_BYTES = _CACHE_BYTES // 16  # an entry estimated bigger than this is computed and not kept
_ID_BYTES = 40  # a kept id: its slot in a list or tuple and, above 256, its own int object
K = TypeVar("K")
V = TypeVar("V")


class _Missing(enum.Enum):
    MISSING = enum.auto()


class _BoundedCache(Generic[K, V]):
    """A dict bounded by its count of entries and their estimated bytes (`_CACHE_BYTES`), oldest out
    first; an entry estimated above `_ENTRY_BYTES` is computed and not kept. Locked: a renderer is shared
    by the proxy's loop, its worker threads (big requests) and the env's threads (observations)."""

    def __init__(self, entries: int) -> None:
        self._entries = entries
        self._items: dict[K, tuple[V, int]] = {}  # value, its estimated bytes
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: K) -> V | Literal[_Missing.MISSING]:
        found = self._items.get(key)  # one lookup: `clear` may run between a test and a read
        return _Missing.MISSING if found is None else found[0]

    def put(self, key: K, value: V, cost: int) -> None:
        if cost > _ENTRY_BYTES:
            return
        with self._lock:
            if key in self._items:
                return
            self._items[key] = (value, cost)
            self._bytes += cost
            while len(self._items) > self._entries or self._bytes > _CACHE_BYTES:
                self._bytes -= self._items.pop(next(iter(self._items)))[1]

    def clear(self) -> None:
        with self._lock:
            self._items = {}
            self._bytes = 0


def _head_cost(head: str, ids: Sequence[int]) -> int:
    return len(head) + _ID_BYTES * len(ids)


def _suffix_cost(ids: tuple[int, ...] | None) -> int:
    return (
        2 * _ID_BYTES * len(ids) if ids else 0
    )  # ids, and the messages' text the key keeps (~4 chars per id)


def template_messages(messages: Iterable[Message]) -> list[dict[str, Any]]:
    """Canonical messages as the dicts HF chat templates expect (tool results one message each)."""
    out: list[dict[str, Any]] = []
    for msg in messages:
        if msg.role == "tool":
            out.extend(_tool_result(p) for p in msg.parts if isinstance(p, ToolResultPart))
        elif msg.role == "assistant":
            out.append(_assistant(msg))
        else:
            out.append({"role": msg.role, "content": msg.text()})
    return out


def _tool_result(part: ToolResultPart) -> dict[str, Any]:
    out = {"role": "tool", "content": part.content, "tool_call_id": part.tool_call_id}
    if part.name:
        out["name"] = part.name
    return out


def _assistant(msg: Message) -> dict[str, Any]:
    out: dict[str, Any] = {"role": "assistant", "content": ""}
    for part in msg.parts:
        if isinstance(part, TextPart):
            out["content"] += part.text
        elif isinstance(part, ThinkingPart):
            out["reasoning_content"] = out.get("reasoning_content", "") + part.text
        elif isinstance(part, ToolCallPart):
            call = {"name": part.name, "arguments": part.parsed_arguments()}
            out.setdefault("tool_calls", []).append({"id": part.id, "type": "function", "function": call})
    return out


def template_tools(tools: Sequence[Tool]) -> list[dict[str, Any]] | None:
    """Tools in the OpenAI function shape HF templates render; None when there are none."""
    if not tools:
        return None
    return [
        {
            "type": "function",
            "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
        }
        for t in tools
    ]


class Renderer:
    """A tokenizer's chat template, plus what the splice needs to know about it.

    Attributes:
        eos_ids: ids that end a turn when sampled (the tokenizer's eos and the template's).
        eot_text: the text the template writes right after an assistant message's content
            (`<|im_end|>\\n` for ChatML).
        append_only: whether suffix-only rendering is exact for this template (see module doc).
    """

    def __init__(self, tokenizer: Any, *, template_kwargs: dict[str, Any] | None = None) -> None:
        self.tokenizer = tokenizer
        # What `apply_chat_template` passes, resolved once: its per-call overhead was 3x the render.
        self.template_kwargs = {**tokenizer.special_tokens_map, **(template_kwargs or {})}
        self._templates = {
            False: tokenizer.get_chat_template(None, None),
            True: tokenizer.get_chat_template(None, [{}]),
        }
        # OPENENV_FAST_PATHS=0 (`fast_paths.py`): the tokenizer's own `encode`, no word encoder.
        fast = fast_paths()
        exact = (_fast_encoder(tokenizer) if fast else None) or (
            lambda text: tokenizer.encode(text, add_special_tokens=False)
        )
        words = WordEncoder.for_tokenizer(tokenizer, exact) if fast else None
        self._encode = words.encode if words is not None else exact
        self._decode = (_fast_decoder(tokenizer) if fast else None) or (
            lambda ids: str(tokenizer.decode(ids, skip_special_tokens=False))
        )
        self._words = words
        self._byte_level = fast and _byte_level_decoder(tokenizer)
        self.eot_text = self._probe_eot()
        self.eos_text = str(tokenizer.eos_token or "")
        self.eos_ids = frozenset(self._eos_ids())
        self._anchor_text = self._render_anchor()
        self._head_ids: _BoundedCache[str, list[int]] = _BoundedCache(_HEAD_CACHE)
        self._head_texts: _BoundedCache[tuple[int, ...], str] = _BoundedCache(_HEAD_CACHE)
        self._suffixes: _BoundedCache[tuple[str, tuple[Message, ...]], tuple[int, ...] | None] = (
            _BoundedCache(_SUFFIX_CACHE)
        )
        self.append_only = self._probe_append_only()

    @classmethod
    def from_pretrained(cls, path: str | Path, **kwargs: Any) -> Renderer:
        from transformers import AutoTokenizer

        return cls(AutoTokenizer.from_pretrained(str(path)), **kwargs)

    # ---- text and ids ----------------------------------------------------------------------------

    def render(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        *,
        generation_prompt: bool = True,
    ) -> str:
        """The template's text for template-shaped messages (what `apply_chat_template` renders)."""
        try:
            rendered, _ = render_jinja_template(
                conversations=[messages],
                tools=tools,
                chat_template=self._templates[bool(tools)],
                add_generation_prompt=generation_prompt,
                **self.template_kwargs,
            )
        except TemplateError as exc:  # templates reject shapes they cannot render (raise_exception)
            raise BadRequest(
                f"the model's chat template cannot render this conversation: {exc}", param="messages"
            ) from None
        return str(rendered[0])

    def encode(self, text: str) -> list[int]:
        """Token ids of rendered text; special-token strings in it become their ids. A new list each call."""
        return self._encode(text)

    def decode(self, ids: Sequence[int]) -> str:
        return self._decode(ids if type(ids) is list else list(ids))

    def decode_extending(self, ids: Sequence[int], known: tuple[Sequence[int], str] | None) -> str:
        """`decode(ids)`, computed from `known` (ids decoded before and their text) where those ids begin
        `ids`: only the rest is decoded. A turn's prompt extends the last one, so an episode's observation
        (13k-token prompts for codex, decoded every turn) costs its new tokens only.

        Exact only for a byte-level decoder (the text is the UTF-8 of each id's bytes joined, with no
        clean-up across them) and a known text that ends on a whole character: anything else (a known
        text ending in U+FFFD, a part of a character; another decoder; transformers' space clean-up)
        decodes all of `ids`. Without usable `known` ids, a byte-level decoder still skips the head it
        decoded before (`_decode_after_head`)."""
        ids = ids if type(ids) is list else list(ids)
        if not self._byte_level:
            return self._decode(ids)
        if known is not None:
            head, text = known
            n = len(head)
            if 0 < n <= len(ids) and not text.endswith("\ufffd") and ids[:n] == list(head):
                return text + self._decode(ids[n:])
        return self._decode_after_head(ids)

    def _decode_after_head(self, ids: list[int]) -> str:
        """`decode(ids)` for a byte-level decoder, with the head (the ids through the first end-of-turn
        id: system prompt and tool schemas, the same in every session of a harness) decoded once per
        process. An episode's first observation then decodes only what follows it: that was ~2 ms of the
        env's CPU in every codex episode (a 12k-token head). The head ends on a special token, a whole
        character, so its text joins the rest's exactly."""
        cut = min((ids.index(e) for e in self.eos_ids if e in ids), default=-1) + 1
        if cut == 0:
            return self._decode(ids)
        key = tuple(ids[:cut])
        head = self._head_texts.get(key)
        if head is _Missing.MISSING:
            head = self._decode(ids[:cut])
            if head.endswith("\ufffd"):  # not a whole character after all: no join is exact
                return self._decode(ids)
            self._head_texts.put(key, head, _head_cost(head, key))
        return head + self._decode(ids[cut:])

    def completion_text(self, ids: Sequence[int]) -> str:
        """The text of a completion without its trailing end-of-turn token(s), for parsing."""
        end = len(ids)
        while end and ids[end - 1] in self.eos_ids:
            end -= 1
        return self.decode(ids[:end])

    # ---- prompts -----------------------------------------------------------------------------------

    def full_text(self, messages: Sequence[Message], tools: Sequence[Tool]) -> str:
        return self.render(template_messages(messages), template_tools(tools))

    def full_prompt(self, messages: Sequence[Message], tools: Sequence[Tool]) -> tuple[str, list[int]]:
        """(text, ids) of the whole conversation with the generation prompt.

        The first block (system prompt and tool schemas, up to the first end-of-turn token) is the
        same in every session of a harness, so its ids are cached; special tokens split
        tokenization, so ids(head + rest) == ids(head) + ids(rest).
        """
        text = self.full_text(messages, tools)
        cut = text.find(self.eos_text) + len(self.eos_text) if self.eos_text else 0
        if cut <= len(self.eos_text):
            return text, self.encode(text)
        head = text[:cut]
        ids = self._head_ids.get(head)
        if ids is _Missing.MISSING:
            ids = self.encode(head)
            self._head_ids.put(head, ids, _head_cost(head, ids))
        return text, ids + self.encode(text[cut:])

    def bridge_text(self, completion_ids: Sequence[int]) -> str:
        """What the template puts after the completion's last id: the rest of the end-of-turn
        marker (`\\n` when the model sampled `<|im_end|>`, all of `<|im_end|>\\n` when it did not)."""
        if completion_ids and completion_ids[-1] in self.eos_ids and self.eot_text.startswith(self.eos_text):
            return self.eot_text[len(self.eos_text) :]
        return self.eot_text

    def suffix_text(self, new: Sequence[Message]) -> str | None:
        """Rendered text after the end-of-turn of `new[0]` (the assistant reply being extended),
        through the next generation prompt; None if the template did not render as expected."""
        whole = self.render(_ANCHOR + template_messages(new), None)
        return after_reply(whole, self._anchor_text, self.eot_text)

    def suffix_ids(self, bridge: str, new: Sequence[Message]) -> tuple[int, ...] | None:
        """ids of `bridge + suffix_text(new)`, remembered by value: the rollouts of one task (a
        GRPO group) send the same tool results, and tokenizing them is most of a turn's cost. A tuple,
        shared with the cache: the collector stops walking an all-int tuple after its first pass,
        where it walks a list of ids on every pass for as long as the turn is in flight."""
        key = (bridge, tuple(new))
        found = self._suffixes.get(key)
        if found is not _Missing.MISSING:
            return found
        text = self.suffix_text(new)
        ids = None if text is None else tuple(self.encode(bridge + text))
        self._suffixes.put(key, ids, _suffix_cost(ids))
        return ids

    def forget_suffixes(self) -> None:
        """Drop the rendered suffixes and learnt words that sessions' messages left behind; the system+tools
        heads stay (a harness sends the same one every episode, and they are few)."""
        self._suffixes.clear()
        if self._words is not None:
            self._words.forget()

    def extend_text(self, full: str, earlier: str) -> str | None:
        """Like `suffix_text`, from a full render and the extended turn's full prompt text; None when
        `earlier` is no longer a prefix (the template or the harness rewrote history)."""
        return after_reply(full, earlier, self.eot_text)

    # ---- template probes ---------------------------------------------------------------------------

    def _probe_eot(self) -> str:
        msgs = [
            {"role": "system", "content": "s"},
            {"role": "user", "content": "u"},
            {"role": "assistant", "content": _SENTINEL},
        ]
        try:
            text = self.render(msgs, None, generation_prompt=False)
        except BadRequest:
            text = ""
        tail = text[text.rfind(_SENTINEL) + len(_SENTINEL) :] if _SENTINEL in text else ""
        return tail or str(self.tokenizer.eos_token or "")

    def _render_anchor(self) -> str:
        try:
            return self.render(_ANCHOR, None)
        except BadRequest:  # suffix rendering is then impossible: `append_only` turns False
            return "\0"

    def _eos_ids(self) -> list[int]:
        ids = [self.tokenizer.eos_token_id] if self.tokenizer.eos_token_id is not None else []
        head = self.eot_text.strip()
        if head:
            first = self.encode(head)
            if len(first) == 1:
                ids.append(first[0])
        return [i for i in ids if i is not None]

    def _probe_append_only(self) -> bool:
        """Suffix rendering is exact on a tool loop and a follow-up question with reasoning."""
        call = ToolCallPart(id="call_1", name="probe", arguments='{"a": 1}')
        convo = [
            Message(role="system", parts=(TextPart(text="S"),)),
            Message(role="user", parts=(TextPart(text="U"),)),
            Message(role="assistant", parts=(ThinkingPart(text="R"), TextPart(text="C"), call)),
            Message(
                role="tool",
                parts=(
                    ToolResultPart(tool_call_id="call_1", content="T1", name="probe"),
                    ToolResultPart(tool_call_id="call_1", content="T2", name="probe"),
                ),
            ),
            Message(role="assistant", parts=(ThinkingPart(text="R2"), TextPart(text="D"))),
            Message(role="user", parts=(TextPart(text="U2"),)),
        ]
        tools = [Tool(name="probe", parameters={"type": "object", "properties": {"a": {"type": "integer"}}})]
        try:
            for cut, end in ((2, 4), (4, 6)):
                earlier = self.full_text(convo[:cut], tools)
                expected = self.extend_text(self.full_text(convo[:end], tools), earlier)
                if expected is None or expected != self.suffix_text(convo[cut:end]):
                    return False
        except Exception:
            return False
        return True


def _fast_encoder(tokenizer: Any) -> Any:
    """The Rust tokenizer's encode without offset tracking (`encode_batch_fast`, tokenizers >= 0.21):
    the same ids, ~20% less CPU on a turn's new tokens, the largest cost left per turn."""
    fast = getattr(tokenizer, "backend_tokenizer", None)
    if fast is None:
        return None
    if hasattr(fast, "encode_batch_fast"):
        return lambda text: fast.encode_batch_fast([text], add_special_tokens=False)[0].ids
    return lambda text: fast.encode(text, add_special_tokens=False).ids  # `.ids` is a new list each time


def _fast_decoder(tokenizer: Any) -> Any:
    """The Rust tokenizer's decode, where it is the whole of transformers' (no clean-up of spaces after
    it): the same text for 60% of the CPU, transformers checking every id's type first."""
    fast = getattr(tokenizer, "backend_tokenizer", None)
    if fast is None or getattr(tokenizer, "clean_up_tokenization_spaces", True):
        return None
    return lambda ids: str(fast.decode(ids, skip_special_tokens=False))


def _byte_level_decoder(tokenizer: Any) -> bool:
    """Whether `_fast_decoder` decodes this tokenizer and its decoder is byte-level alone: then the
    text of ids `a + b` is the text of `a` then of `b`, wherever `a` ends on a whole character."""
    if _fast_decoder(tokenizer) is None:
        return False
    from tokenizers import decoders

    return isinstance(tokenizer.backend_tokenizer.decoder, decoders.ByteLevel)


def after_reply(full: str, earlier: str, eot_text: str) -> str | None:
    """The part of `full` after `earlier` (a prompt ending in a generation prompt), minus the
    assistant reply that follows it up to and including its end-of-turn text."""
    if not full.startswith(earlier):
        return None
    end = full.find(eot_text, len(earlier))
    if end < 0:
        return None
    return full[end + len(eot_text) :]
