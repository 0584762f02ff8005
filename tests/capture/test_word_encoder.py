"""`WordEncoder` gives the tokenizer's own ids, or steps aside.

The tokenizers are the tiny model's (a Qwen2-shaped `Split + ByteLevel` pipeline with an NFC normalizer)
and reshaped copies of it; the reference for every id is the Rust tokenizer itself.
"""

from __future__ import annotations

import json
import sysconfig
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer
from transformers import PreTrainedTokenizerFast

from openenv.capture.renderer import Renderer
from openenv.capture.word_encoder import WordEncoder

SPECIALS = ["<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_response>", "<think>"]


def exact(tokenizer: Any) -> Any:
    return lambda text: tokenizer.backend_tokenizer.encode(text, add_special_tokens=False).ids


def reshaped(tiny: Any, change: Any) -> PreTrainedTokenizerFast:
    """The tiny model's tokenizer with a part of its JSON spec changed."""
    spec = json.loads(tiny.backend_tokenizer.to_str())
    change(spec)
    return PreTrainedTokenizerFast(tokenizer_object=Tokenizer.from_str(json.dumps(spec)))


@pytest.fixture(scope="module")
def tiny(renderer: Renderer) -> Any:
    return renderer.tokenizer


@pytest.fixture(scope="module")
def corpus() -> list[str]:
    """1,500 blocks of real source text (the stdlib's), ASCII and not, 1,400 characters each."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in stdlib.glob("*.py"))[:400]
    text = "".join(p.read_text(errors="replace") for p in files)
    return [text[k : k + 1400] for k in range(0, min(len(text), 1500 * 1400), 1400)]


def test_the_renderer_uses_it_for_the_tiny_model(renderer: Renderer) -> None:
    assert getattr(renderer._encode, "__self__", None).__class__ is WordEncoder


def test_source_text_encodes_exactly_as_the_tokenizer_does(tiny: Any, corpus: list[str]) -> None:
    encoder = WordEncoder.for_tokenizer(tiny, exact(tiny))
    assert encoder is not None
    ascii_blocks = [b for b in corpus if b.isascii()]
    assert len(ascii_blocks) > 1000 and len(ascii_blocks) < len(corpus)  # both paths are exercised
    for block in corpus:
        for text in (block, f"<|im_start|>user\n{block}<|im_end|>\n<|im_start|>assistant\n"):
            assert encoder.encode(text) == exact(tiny)(text)


@settings(max_examples=400, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.text(st.characters(max_codepoint=127), max_size=40),
            st.sampled_from(SPECIALS),
            st.sampled_from([" ", "  ", "\n", "\r\n", "\t", "'s", "'LL", "123", " x", "é"]),
        ),
        max_size=30,
    )
)
def test_any_text_encodes_exactly_as_the_tokenizer_does(tiny: Any, pieces: list[str]) -> None:
    text = "".join(pieces)
    encoder = WordEncoder.for_tokenizer(tiny, exact(tiny))
    assert encoder is not None and encoder.encode(text) == exact(tiny)(text)


class Counted:
    """The tokenizer's encode, counting the texts it was handed (the word path's fallbacks)."""

    def __init__(self, tokenizer: Any) -> None:
        self.encode, self.texts = exact(tokenizer), []

    def __call__(self, text: str) -> list[int]:
        self.texts.append(text)
        return self.encode(text)


def test_text_with_other_characters_takes_the_word_path_and_encodes_exactly(
    tiny: Any, corpus: list[str]
) -> None:
    """A name, a dash or a quote mark in a block used to send all of it to the tokenizer (3-4x the CPU);
    such blocks were the proxy's slowest turns. Now they are cut by words too, with the same ids."""
    fallback = Counted(tiny)
    encoder = WordEncoder.for_tokenizer(tiny, fallback)
    assert encoder is not None
    fallback.texts.clear()
    other = [b for b in corpus if not b.isascii()]
    assert len(other) >= 5
    extra = [
        "e\u0301te\u0301 (NFC composes it)",
        "Łódź — “ok” … ½ ² 日本語 😀👍🏽",
        "a\u00a0b\u3000c\u2028d\u0085e",
    ]
    for block in other + extra:
        for text in (block, f"<|im_start|>user\n{block}<|im_end|>\n<|im_start|>assistant\n"):
            assert encoder.encode(text) == exact(tiny)(text)
    assert fallback.texts == []


def test_a_character_the_two_engines_read_differently_sends_its_text_to_the_tokenizer(tiny: Any) -> None:
    """`regex` knows U+0558 as a letter (Unicode 16); the tokenizer's Oniguruma does not. Cut by
    `regex` alone, the text's ids would be wrong; the character check sends it to the tokenizer."""
    import regex

    from openenv.capture.word_encoder import _byte_level

    text = "the path\u0558's end"
    spec = json.loads(tiny.backend_tokenizer.to_str())
    words = regex.findall(spec["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"], text)
    model = tiny.backend_tokenizer.model
    naive = [t.id for w in words for t in model.tokenize(_byte_level(w))]
    assert naive != exact(tiny)(text)  # what a regex-only cut would have recorded
    fallback = Counted(tiny)
    encoder = WordEncoder.for_tokenizer(tiny, fallback)
    assert encoder is not None
    fallback.texts.clear()
    assert encoder.encode(text) == exact(tiny)(text)
    assert fallback.texts == [text]
    assert encoder.encode("café") == exact(tiny)("café") and fallback.texts == [text]  # only that text


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.text(st.characters(exclude_categories=("Cs",)), max_size=20),
            st.text(st.characters(max_codepoint=0x3000, exclude_categories=("Cs",)), max_size=20),
            st.sampled_from([*SPECIALS, " ", "\n", "'s", "'ſ", "ß", "e\u0301", "\u0558", "\u00a0", "😀"]),
        ),
        max_size=20,
    )
)
def test_any_unicode_text_encodes_exactly_as_the_tokenizer_does(tiny: Any, pieces: list[str]) -> None:
    text = "".join(pieces)
    encoder = WordEncoder.for_tokenizer(tiny, exact(tiny))
    assert encoder is not None and encoder.encode(text) == exact(tiny)(text)


def test_remembered_character_verdicts_are_bounded(tiny: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A harness can send every character there is; the verdicts kept start over past a bound."""
    from openenv.capture import word_encoder

    monkeypatch.setattr(word_encoder, "_MAX_CHARS", 200)
    encoder = WordEncoder.for_tokenizer(tiny, exact(tiny))
    assert encoder is not None and encoder._unicode is not None
    text = "".join(map(chr, range(0x4E00, 0x4E00 + 1000)))
    assert encoder.encode(text) == exact(tiny)(text)
    assert 0 < len(encoder._unicode._verdicts) <= 200


@pytest.mark.parametrize(
    ("pattern", "atoms"),
    [
        (
            r"(?i:'s|'ll)|[^\r\n\p{L}\p{N}]?\p{L}+|\s+(?!\S)",
            ["(?i:l)", "(?i:ll)", "(?i:s)", r"\p{L}", r"\p{N}", r"\s"],
        ),
        (r" ?\p{N}+|.", [".", r"\p{N}"]),
        (r"\b\w+", None),
        (r"(?<=x)\p{L}", None),
        (r"[[:alpha:]]+", None),
        (r"\X|\s", None),
        (r"(?u)\w", None),
        (r"(?i:[a-z]+)|\s", None),
    ],
)
def test_the_unicode_cut_asks_every_part_whose_meaning_depends_on_unicode(
    pattern: str, atoms: list[str] | None
) -> None:
    from openenv.capture.word_encoder import _unicode_atoms

    assert _unicode_atoms(pattern) == atoms


def test_gpt2_style_byte_level_pretokenizers_are_covered_too(tiny: Any, corpus: list[str]) -> None:
    def gpt2(spec: dict[str, Any]) -> None:
        spec["pre_tokenizer"] = {
            "type": "ByteLevel",
            "add_prefix_space": False,
            "trim_offsets": True,
            "use_regex": True,
        }

    tokenizer = reshaped(tiny, gpt2)
    encoder = WordEncoder.for_tokenizer(tokenizer, exact(tokenizer))
    assert encoder is not None
    for block in corpus[:300]:
        assert encoder.encode(block) == exact(tokenizer)(block)


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(
            lambda s: s.update(normalizer={"type": "Lowercase"}), id="a normalizer that changes ASCII"
        ),
        pytest.param(lambda s: s["model"].update(dropout=0.1), id="BPE dropout"),
        pytest.param(
            lambda s: s.update(
                pre_tokenizer={
                    "type": "Metaspace",
                    "replacement": "_",
                    "prepend_scheme": "always",
                    "split": True,
                }
            ),
            id="a sentencepiece-style pre-tokenizer",
        ),
        pytest.param(
            lambda s: s["added_tokens"][1].update(lstrip=True), id="an added token that strips spaces"
        ),
    ],
)
def test_other_pipelines_get_no_word_encoder(tiny: Any, change: Any) -> None:
    tokenizer = reshaped(tiny, change)
    assert WordEncoder.for_tokenizer(tokenizer, exact(tokenizer)) is None


def test_a_tokenizer_that_disagrees_on_the_probe_gets_no_word_encoder(tiny: Any) -> None:
    assert WordEncoder.for_tokenizer(tiny, lambda text: exact(tiny)(text)[:-1]) is None


def test_a_tokenizer_that_disagrees_on_other_characters_keeps_the_ascii_path(tiny: Any) -> None:
    def ascii_only(text: str) -> list[int]:
        ids = exact(tiny)(text)
        return ids if text.isascii() else ids[:-1]

    encoder = WordEncoder.for_tokenizer(tiny, ascii_only)
    assert encoder is not None and encoder._unicode is None
    assert encoder.encode("café") == ascii_only("café")  # the tokenizer's answer, whatever it is


def test_added_tokens_are_cut_in_the_tokenizers_two_passes(tiny: Any) -> None:
    """Tokens matched on raw text go first; tokens matched on normalized text only in what is left."""

    def overlapping(spec: dict[str, Any]) -> None:
        base = len(spec["model"]["vocab"])
        spec["added_tokens"] += [
            {
                "id": base,
                "content": "abX",
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": True,
                "special": False,
            },
            {
                "id": base + 1,
                "content": "XYZ",
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "special": True,
            },
        ]

    tokenizer = reshaped(tiny, overlapping)
    encoder = WordEncoder.for_tokenizer(tokenizer, exact(tokenizer))
    assert encoder is not None
    for text in ("abXYZ", "abX YZ", "xx abXYZabX XYZ", "<|im_start|>abXYZ<|im_end|>"):
        assert encoder.encode(text) == exact(tokenizer)(text)
    assert (
        encoder.encode("abXYZ")[-1] == len(json.loads(tiny.backend_tokenizer.to_str())["model"]["vocab"]) + 1
    )


def test_remembered_words_leave_the_garbage_collectors_view(tiny: Any, corpus: list[str]) -> None:
    """Up to 65k words are remembered process-wide; as lists they were ~40% of what every full
    collection walked at 1,000 sessions. Their ids are kept as tuples, which the collector stops
    tracking after the first collection they survive."""
    import gc

    encoder = WordEncoder.for_tokenizer(tiny, exact(tiny))
    assert encoder is not None
    for block in corpus[:50]:
        encoder.encode(block)
    gc.collect()
    learnt = list(encoder._cache.values())
    assert len(learnt) > 1000
    assert not [ids for ids in learnt if gc.is_tracked(ids)]


@pytest.mark.parametrize("pattern", ["gpt2", "tiny"])
def test_the_ascii_word_cut_is_the_patterns_own_on_any_ascii_text(
    tiny: Any, corpus: list[str], pattern: str
) -> None:
    """The stdlib `re` cuts ASCII text (half the CPU of `regex`), from the pattern with `\\p{L}` and
    `\\p{N}` spelled in ASCII: every word the same as the tokenizer's own pattern cuts."""
    import regex

    from openenv.capture.word_encoder import _GPT2_PATTERN, _ascii_words

    spec = json.loads(tiny.backend_tokenizer.to_str())
    source = (
        _GPT2_PATTERN if pattern == "gpt2" else spec["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"]
    )
    fast, slow = _ascii_words(source), regex.compile(source)
    assert fast is not None
    texts = [b for b in corpus if b.isascii()] + ["".join(map(chr, range(128))) * 3, "It'S 'LL\x1c\x1f\x0b x"]
    for text in texts:
        assert fast.findall(text) == slow.findall(text)


@pytest.mark.parametrize("pattern", [r"\p{Lu}+|\s+", r"\P{L}+", r"[[a-z]]+", r"(?<name>\p{L}"])
def test_a_pattern_the_ascii_cut_cannot_mirror_keeps_regex(pattern: str) -> None:
    from openenv.capture.word_encoder import _ascii_words

    assert _ascii_words(pattern) is None
