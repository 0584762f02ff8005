"""`WordEncoder`: the tokenizer's own ids for ASCII text, about twice as fast on a turn's new text.

Tokenizing each turn's new text (a tool result, a file) is the largest CPU cost a turn has left, and
most of it is the Rust tokenizer's pre-tokenizer: its regex engine (Oniguruma) and the bookkeeping of
every word's offsets. A byte-level BPE tokenizer cuts text into words with one regex and runs BPE on
each word alone, so ids(text) is the concatenation of ids(word). This encoder keeps that pipeline and
changes only who does which part:

- added tokens (`<|im_end|>`...) are cut out first, leftmost-longest and in its two passes (raw, then
  normalized), as the tokenizer does;
- the rest is cut into words with the tokenizer's own pattern, run by the `regex` module;
- each word's ids come from the tokenizer's own BPE model the first time it is seen, then from a dict.

It applies only where that is provably the same pipeline: ASCII text (every Unicode normalizer leaves it
as it is, and `\\p{L}`, `\\p{N}`, `\\s` mean the same in both regex engines), a `Split(pattern) +
ByteLevel` or `ByteLevel(use_regex)` pre-tokenizer, no truncation, no word-level flags on added tokens.
`for_tokenizer` checks all of it, and checks a probe text against the real tokenizer, before it
answers anything; other text, or any other tokenizer, goes to the tokenizer itself.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import regex

__all__ = ["WordEncoder"]

# The pattern `ByteLevel(use_regex=True)` splits with (GPT-2's).
_GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
_ASCII_CLASSES = {"L": "A-Za-z", "N": "0-9"}  # what \\p{L} and \\p{N} match in ASCII text
_IDENTITY_ON_ASCII = {"NFC", "NFD", "NFKC", "NFKD"}
_MAX_WORDS = 1 << 16  # remembered words; past it the dict starts over (~15 MB at most)
# Every kind of word the common patterns cut: contractions in both cases, letters after punctuation,
# digit runs, runs of spaces before words and at line ends, tabs, CR/LF, form feeds and ASCII controls.
_PROBE = (
    "It's 'S'LL we'd I'M x'Ve\n  def f(a_b, c2=30_000):\r\n\treturn a_b**2 + 12345  # ok?!\n\n\n"
    '    x  =  [1,2 ,3]\t\t\n\x0b\x0c\x1c\x1d\x1e\x1f\x7f\x00 end  \n  .. ---===>>> ~`|\\ "quoted"  '
)


class WordEncoder:
    """Encodes ASCII text exactly as `tokenizer` would (see module doc); other text with `fallback`."""

    def __init__(
        self, pattern: str, added: list[dict[str, Any]], model: Any, fallback: Callable[[str], list[int]]
    ) -> None:
        words = regex.compile(pattern)
        if words.groups:  # findall would return the groups, not the words
            raise ValueError(f"the split pattern has capture groups: {pattern!r}")
        self._words = (_ascii_words(pattern) or words).findall  # only ever given ASCII text
        # Added tokens are cut out in two passes, as the tokenizer does: those matched on the raw text
        # first, then those matched on normalized text (the same text, for ASCII) in what is left.
        self._passes = [
            _alternation([t["content"] for t in added if bool(t.get("normalized")) is normalized])
            for normalized in (False, True)
        ]
        self._added_ids = {t["content"]: t["id"] for t in added}
        self._model = model
        self._fallback = fallback
        self._bytes = str.maketrans(_byte_level_ascii())
        self._cache: dict[str, tuple[int, ...]] = {}

    @classmethod
    def for_tokenizer(cls, tokenizer: Any, fallback: Callable[[str], list[int]]) -> WordEncoder | None:
        """An encoder for `tokenizer` (a transformers fast tokenizer), or None when it cannot be proven
        the same as the tokenizer: another pipeline shape, or a probe text that encodes differently."""
        backend = getattr(tokenizer, "backend_tokenizer", None)
        if backend is None or getattr(backend, "encode_special_tokens", False):
            return None
        if backend.truncation is not None or backend.padding is not None:
            return None
        spec = json.loads(backend.to_str())
        pattern = _pattern(spec.get("pre_tokenizer"))
        model = spec.get("model") or {}
        if pattern is None or not _identity_on_ascii(spec.get("normalizer")) or model.get("type") != "BPE":
            return None
        if model.get("dropout"):  # BPE-dropout samples its merges: no two encodes need agree
            return None
        added = spec.get("added_tokens") or []
        if any(t.get("lstrip") or t.get("rstrip") or t.get("single_word") for t in added):
            return None
        try:
            encoder = cls(pattern, added, backend.model, fallback)
        except (regex.error, ValueError):
            return None
        probe = _PROBE + "".join(map(chr, range(128))) + "".join(t["content"] + "x " for t in added)
        return encoder if encoder.encode(probe) == list(fallback(probe)) else None

    def encode(self, text: str) -> list[int]:
        if not text.isascii():
            return list(self._fallback(text))
        return self._cut(text, 0)

    def _cut(self, text: str, depth: int) -> list[int]:
        """Added tokens of pass `depth` and the ids of the text between them (cut by the next pass)."""
        if depth == len(self._passes):
            return self._segment(text)
        tokens = self._passes[depth]
        if tokens is None:
            return self._cut(text, depth + 1)
        out: list[int] = []
        start = 0
        for match in tokens.finditer(text):
            if match.start() > start:
                out += self._cut(text[start : match.start()], depth + 1)
            out.append(self._added_ids[match.group()])
            start = match.end()
        if start < len(text):
            out += self._cut(text[start:], depth + 1)
        return out

    def forget(self) -> None:
        """Drop the remembered words (they are learnt again on first use)."""
        self._cache = {}

    def _segment(self, text: str) -> list[int]:
        words = self._words(text)
        if sum(map(len, words)) != len(text):  # the pattern skipped characters: the tokenizer keeps them
            return list(self._fallback(text))
        out: list[int] = []
        known = self._cache.get
        for word in words:
            ids = known(word)
            if ids is None:
                ids = self._learn(word)
            out += ids
        return out

    def _learn(self, word: str) -> tuple[int, ...]:
        # A tuple, not a list: a tuple of ints is untracked by the garbage collector after the first
        # collection it survives, where 65k remembered lists were ~40% of what each full one walked.
        if len(self._cache) >= _MAX_WORDS:
            self._cache.clear()
        ids = self._cache[word] = tuple([t.id for t in self._model.tokenize(word.translate(self._bytes))])
        return ids


def _ascii_words(pattern: str) -> re.Pattern[str] | None:
    """`pattern` for ASCII text only, run by the stdlib's `re`: half the CPU of `regex` on a turn's
    text, where cutting words was two thirds of the encoder's time. On ASCII text `\\p{L}` is
    `[A-Za-z]` and `\\p{N}` is `[0-9]`, and under `re.ASCII` so are `\\s`, `\\S` and case-folding
    ASCII's own. None when the pattern uses anything else `re` may read differently (another Unicode
    property, a nested class) or cannot compile; the probe in `for_tokenizer` checks the result too."""
    out: list[str] = []
    depth = i = opened = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            prop = re.match(r"\\p\{([LN])\}", pattern[i:])
            if prop is not None:
                chars = _ASCII_CLASSES[prop.group(1)]
                out.append(chars if depth else f"[{chars}]")
                i += prop.end()
                continue
            if pattern[i + 1 : i + 2] in ("p", "P"):
                return None
            out.append(pattern[i : i + 2])
            i += 2
            continue
        if c == "[":
            if depth:
                return None
            depth, opened = 1, i + 1 + (pattern[i + 1 : i + 2] == "^")
        elif c == "]" and depth and i > opened:  # a `]` first in a class is a literal
            depth = 0
        out.append(c)
        i += 1
    try:
        return re.compile("".join(out), re.ASCII)
    except re.error:
        return None


def _alternation(tokens: list[str]) -> Any:
    """Leftmost-longest matching of `tokens` (longer ones tried first at each position), or None."""
    if not tokens:
        return None
    return regex.compile("|".join(regex.escape(t) for t in sorted(tokens, key=len, reverse=True)))


def _pattern(pre: dict[str, Any] | None) -> str | None:
    """The split pattern of a byte-level pre-tokenizer, when that is all it does to ASCII text."""
    if pre is None:
        return None
    if pre.get("type") == "ByteLevel":
        return _GPT2_PATTERN if pre.get("use_regex", True) and not pre.get("add_prefix_space") else None
    steps = pre.get("pretokenizers") if pre.get("type") == "Sequence" else None
    if not steps or len(steps) != 2:
        return None
    split, level = steps
    if (
        split.get("type") != "Split"
        or split.get("behavior") != "Isolated"
        or split.get("invert")
        or "Regex" not in (split.get("pattern") or {})
    ):
        return None
    if level.get("type") != "ByteLevel" or level.get("use_regex", True) or level.get("add_prefix_space"):
        return None
    return str(split["pattern"]["Regex"])


def _identity_on_ascii(normalizer: dict[str, Any] | None) -> bool:
    if normalizer is None:
        return True
    if normalizer.get("type") == "Sequence":
        return all(_identity_on_ascii(n) for n in normalizer.get("normalizers", []))
    return normalizer.get("type") in _IDENTITY_ON_ASCII


def _byte_level_ascii() -> dict[str, str]:
    """The byte-level alphabet's character for each ASCII byte: printable ones stand for themselves,
    the 33 others (controls, space, DEL) for U+0100 onwards in byte order (GPT-2's table)."""
    printable = set(range(ord("!"), ord("~") + 1))
    shifted = [b for b in range(256) if b not in printable and not (0xA1 <= b <= 0xAC or 0xAE <= b <= 0xFF)]
    table = {chr(b): chr(256 + n) for n, b in enumerate(shifted)}
    return {chr(b): table.get(chr(b), chr(b)) for b in range(128)}
