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

It applies only where that is provably the same pipeline: a `Split(pattern) + ByteLevel` or
`ByteLevel(use_regex)` pre-tokenizer, no truncation, no word-level flags on added tokens. `for_tokenizer`
checks all of it, and checks probe texts against the real tokenizer, before it answers anything; any
other tokenizer goes to the tokenizer itself.

ASCII text is the fast case: every Unicode normalizer leaves it as it is, and `\\p{L}`, `\\p{N}`, `\\s`
mean the same in both regex engines. Text with other characters (one in every ~15 blocks of real source
text: a name, a dash, a quote mark) took the tokenizer's whole path, 3-4x the CPU, and those turns were
the proxy's slowest. It is cut the same way once every character in it is known to be read alike by
both engines (`_UnicodeCut`): the pattern's Unicode-dependent parts (`\\p{..}`, `\\s`, `.`, its
case-insensitive letters) are asked of each new character, of Oniguruma (the tokenizer's own engine,
through a `Split` pre-tokenizer) and of `regex`. They do disagree: `regex` knows ~17k letters of
Unicode 16-17 that the tokenizer's tables do not (U+0558...), and `ß` matches `(?i:ss)` in Oniguruma
only. A text with any such character goes to the tokenizer whole. The tokenizer's own normalizer is
applied where the tokenizer applies it (after the first pass of added tokens).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import regex
from tokenizers import Regex
from tokenizers.pre_tokenizers import Split

__all__ = ["WordEncoder"]

# The pattern `ByteLevel(use_regex=True)` splits with (GPT-2's).
_GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
_ASCII_CLASSES = {"L": "A-Za-z", "N": "0-9"}  # what \\p{L} and \\p{N} match in ASCII text
_IDENTITY_ON_ASCII = {"NFC", "NFD", "NFKC", "NFKD"}
_MAX_WORDS = 1 << 16  # remembered words; past it the dict starts over (~15 MB at most)
_MAX_CHARS = 1 << 16  # non-ASCII characters whose verdict is remembered; past it the dict starts over
# Every kind of word the common patterns cut: contractions in both cases, letters after punctuation,
# digit runs, runs of spaces before words and at line ends, tabs, CR/LF, form feeds and ASCII controls.
_PROBE = (
    "It's 'S'LL we'd I'M x'Ve\n  def f(a_b, c2=30_000):\r\n\treturn a_b**2 + 12345  # ok?!\n\n\n"
    '    x  =  [1,2 ,3]\t\t\n\x0b\x0c\x1c\x1d\x1e\x1f\x7f\x00 end  \n  .. ---===>>> ~`|\\ "quoted"  '
)
# The same for text with other characters: letters and digits of other scripts, marks NFC composes,
# Unicode spaces and line ends, symbols, an emoji, and a contraction of a letter that case-folds to s.
_UNICODE_PROBE = (
    "Café naïve e\u0301t\u00e9 Łódź — “quoted” ‘x’ … ½ ² ٣ 日本語のテキスト 한국어 Ωμέγα Привет 'ſ 'Ś"
    " a\u00a0b\u3000c\u2028d\u0085e \u200bf 😀👍🏽 ±°§ \ufeff x"
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
        self._unicode: _UnicodeCut | None = None  # set by `for_tokenizer` once its probe agrees

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
        specials = "".join(t["content"] + "x " for t in added)
        probe = _PROBE + "".join(map(chr, range(128))) + specials
        if encoder.encode(probe) != list(fallback(probe)):
            return None
        normalizer = backend.normalizer
        encoder._unicode = _UnicodeCut.for_pattern(
            pattern, normalizer.normalize_str if normalizer is not None else None
        )
        # every ASCII character too, now read by `regex` (the ASCII probe above went through `re`)
        probe = _UNICODE_PROBE + specials + _UNICODE_PROBE + "".join(map(chr, range(128))) + _PROBE + "é"
        if encoder._unicode is not None and encoder.encode(probe) != list(fallback(probe)):
            encoder._unicode = None  # ASCII text only
        return encoder

    def encode(self, text: str) -> list[int]:
        if not text.isascii() and self._unicode is None:
            return list(self._fallback(text))
        try:
            return self._cut(text, 0)
        except _Unsure:
            return list(self._fallback(text))

    def _cut(self, text: str, depth: int) -> list[int]:
        """Added tokens of pass `depth` and the ids of the text between them (cut by the next pass).
        What the first pass leaves is normalized before the second, as the tokenizer does (ASCII text
        needs none: `for_tokenizer` took only normalizers that leave it as it is)."""
        if depth == 1 and self._unicode is not None and not text.isascii():
            text = self._unicode.normalize(text)
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
        if text.isascii():
            words = self._words(text)
        else:  # only reached with a `_UnicodeCut` (see `encode`)
            assert self._unicode is not None
            words = self._unicode.words(text)
        if sum(map(len, words)) != len(text):  # the pattern skipped characters: the tokenizer keeps them
            raise _Unsure
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
        chars = word.translate(self._bytes) if word.isascii() else _byte_level(word)
        ids = self._cache[word] = tuple([t.id for t in self._model.tokenize(chars)])
        return ids


class _Unsure(Exception):
    """This text is not provably cut as the tokenizer cuts it: the tokenizer encodes it whole."""


class _UnicodeCut:
    """The pattern's words in text with non-ASCII characters, by `regex`, for text whose every character
    both engines read alike (see the module doc): each new character is asked once per atom, ~20 us."""

    def __init__(self, pattern: str, atoms: list[str], normalize: Callable[[str], str] | None) -> None:
        self._findall = regex.compile(pattern).findall
        self._atoms = [(regex.compile(a).fullmatch, Split(Regex(a), behavior="removed")) for a in atoms]
        self.normalize: Callable[[str], str] = normalize or str
        self._verdicts: dict[str, bool] = {}

    @classmethod
    def for_pattern(cls, pattern: str, normalize: Callable[[str], str] | None) -> _UnicodeCut | None:
        atoms = _unicode_atoms(pattern)
        if atoms is None:
            return None
        try:
            return cls(pattern, atoms, normalize)
        except Exception:  # an atom either engine cannot compile (regex.error; tokenizers raises Exception)
            return None

    def words(self, text: str) -> list[str]:
        verdicts = self._verdicts
        for char in set(_NON_ASCII.findall(text)):
            agree = verdicts.get(char)
            if agree is None:
                agree = self._agree(char)
            if not agree:
                raise _Unsure
        return list(self._findall(text))

    def _agree(self, char: str) -> bool:
        if len(self._verdicts) >= _MAX_CHARS:
            self._verdicts.clear()
        try:  # a lone surrogate cannot reach the tokenizer at all
            agree = all(
                (ours(char) is not None) == (not theirs.pre_tokenize_str(char))
                for ours, theirs in self._atoms
            )
        except Exception:
            agree = False
        self._verdicts[char] = agree
        return agree


_NON_ASCII = re.compile(r"[^\x00-\x7f]")
_ESCAPED_SETS = {
    "s": r"\s",
    "S": r"\s",
    "w": r"\w",
    "W": r"\w",
    "d": r"\d",
    "D": r"\d",
}
_GROUPS = ("(?:", "(?i:", "(?!", "(?=")


def _unicode_atoms(pattern: str) -> list[str] | None:
    """The parts of `pattern` whose meaning depends on Unicode's tables, each to be asked of both
    engines per character: its character-class escapes, `.`, and (under `(?i`) every run of letters it
    matches without case, and each of their letters. None for a pattern using anything else whose reading
    could differ (`\\b`, `\\X`, `\\R`, POSIX classes, other flags, look-behind): those texts keep the
    tokenizer's path."""
    atoms: set[str] = set()
    runs: list[str] = []
    run = ""
    i = depth = 0
    while i < len(pattern):
        c = pattern[i]
        if c.isascii() and c.isalpha():
            run += c
            i += 1
            continue
        if run:
            runs.append(run)
            run = ""
        if c == "\\":
            letter = pattern[i + 1 : i + 2]
            prop = re.match(r"\\[pP]\{(\w+)\}", pattern[i:])
            if prop is not None:
                atoms.add(rf"\p{{{prop.group(1)}}}")
                i += prop.end()
                continue
            if letter in _ESCAPED_SETS:  # `\pL` without braces is refused below, as other escapes
                atoms.add(_ESCAPED_SETS[letter])
            elif letter.isalnum() and letter not in "rntfv":
                return None
            i += 2
            continue
        if c == "(" and pattern.startswith("(?", i):
            group = next((g for g in _GROUPS if pattern.startswith(g, i)), None)
            if group is None:
                return None
            i += len(group)
            continue
        if c == "[":
            if depth:
                return None  # a nested class: POSIX `[[:alpha:]]` or a set operation
            depth = 1
        elif c == "]":
            depth = 0
        elif c == ".":
            atoms.add(".")
        i += 1
    if run:
        runs.append(run)
    if "(?i" in pattern:
        if re.search(r"[A-Za-z]-[A-Za-z]", pattern):
            return None  # a caseless letter range (`[a-z]` may match the Kelvin sign): not asked per letter
        for word in runs:
            atoms.update(f"(?i:{word[a:b]})" for a in range(len(word)) for b in range(a + 1, len(word) + 1))
    return sorted(atoms)


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


def _byte_level(word: str) -> str:
    """`word`'s UTF-8 bytes in the byte-level alphabet (what `ByteLevel` hands the BPE model)."""
    return word.encode("utf-8").decode("latin-1").translate(_BYTE_LEVEL)


def _byte_level_table() -> dict[int, str]:
    """GPT-2's table: bytes 33-126, 161-172 and 174-255 stand for themselves, the 68 others for U+0100
    onwards in byte order."""
    kept = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    shifted = [b for b in range(256) if b not in kept]
    return {**{b: chr(b) for b in kept}, **{b: chr(256 + n) for n, b in enumerate(shifted)}}


_BYTE_LEVEL = _byte_level_table()


def _byte_level_ascii() -> dict[str, str]:
    """The byte-level alphabet's character for each ASCII byte (printable ones stand for themselves)."""
    return {chr(b): _BYTE_LEVEL[b] for b in range(128)}
