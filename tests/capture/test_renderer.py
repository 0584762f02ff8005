"""The renderer: template facts the splice relies on, and suffix-only rendering equal to full renders."""

from __future__ import annotations

import copy

import pytest

from openenv.capture.canonical import Message, TextPart, ThinkingPart, ToolCallPart, ToolResultPart
from openenv.capture.renderer import Renderer, after_reply

CALL = ToolCallPart(id="c1", name="bash", arguments='{"command": "ls"}')
CONVO = (
    Message(role="system", parts=(TextPart(text="sys"),)),
    Message(role="user", parts=(TextPart(text="list"),)),
    Message(role="assistant", parts=(ThinkingPart(text="hmm"), CALL)),
    Message(role="tool", parts=(ToolResultPart(tool_call_id="c1", content="a.txt", name="bash"),)),
)


def test_end_of_turn_facts_of_the_tiny_template(renderer: Renderer) -> None:
    eos = renderer.tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert renderer.eot_text == "<|im_end|>\n"
    assert eos in renderer.eos_ids
    assert renderer.bridge_text([5, eos]) == "\n"  # the model sampled <|im_end|>; only "\n" is inserted
    assert renderer.bridge_text([5]) == "<|im_end|>\n"  # cut by max_tokens: the whole marker is inserted
    assert renderer.append_only


def test_suffix_render_equals_the_difference_of_full_renders(renderer: Renderer) -> None:
    earlier = renderer.full_text(CONVO[:2], ())
    full = renderer.full_text(CONVO, ())
    suffix = renderer.suffix_text(CONVO[2:])
    assert suffix == renderer.extend_text(full, earlier)
    assert (
        suffix
        == "<|im_start|>user\n<tool_response>\na.txt\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
    )


def test_completion_text_drops_the_end_of_turn_token(renderer: Renderer) -> None:
    ids = renderer.encode("hello") + sorted(renderer.eos_ids)
    assert renderer.completion_text(ids) == "hello"


def test_after_reply_is_none_when_history_was_rewritten() -> None:
    assert after_reply("<a>X<e>\nrest", "<b>", "<e>\n") is None
    assert after_reply("<a>X<e>\nrest", "<a>", "<e>\n") == "rest"


def test_a_template_that_drops_old_reasoning_is_not_append_only(renderer: Renderer) -> None:
    """Qwen3-style: reasoning of assistant turns before the last user message is not rendered."""
    tok = copy.deepcopy(renderer.tokenizer)
    tok.chat_template = (
        "{%- set ns = namespace(last=0) -%}{%- for m in messages %}{%- if m.role == 'user' %}"
        "{%- set ns.last = loop.index0 %}{%- endif %}{%- endfor %}"
        "{%- for m in messages %}<|im_start|>{{ m.role }}\n"
        "{%- if m.role == 'assistant' and m.reasoning_content and loop.index0 > ns.last %}"
        "<think>{{ m.reasoning_content }}</think>{%- endif %}{{ m.content }}<|im_end|>\n{%- endfor %}"
        "{%- if add_generation_prompt %}<|im_start|>assistant\n{%- endif %}"
    )
    assert not Renderer(tok).append_only


@pytest.mark.parametrize("text", ["", "plain", "<think>\nr\n</think>\n\nanswer"])
def test_encode_decode_round_trips_rendered_text(renderer: Renderer, text: str) -> None:
    assert renderer.decode(renderer.encode(text)) == text


def test_a_template_that_refuses_a_conversation_is_a_bad_request(renderer: Renderer) -> None:
    from openenv.errors import BadRequest

    tok = copy.deepcopy(renderer.tokenizer)
    tok.chat_template = (
        "{%- if messages[0].role != 'system' %}{{ raise_exception('system first') }}{%- endif %}"
        "{%- for m in messages %}{{ m.content }}<|im_end|>{%- endfor %}"
    )
    strict = Renderer(tok)
    with pytest.raises(BadRequest, match="cannot render this conversation: system first"):
        strict.full_text((Message(role="user", parts=(TextPart(text="hi"),)),), ())


def test_decode_is_the_tokenizers_own_on_any_ids(renderer: Renderer) -> None:
    """The renderer decodes with the Rust tokenizer directly (transformers checks every id's type
    first); on any ids, special and partial-UTF-8 ones included, the text is transformers' own."""
    import random

    tok = renderer.tokenizer
    rng = random.Random(0)
    specials = list(tok.added_tokens_decoder)
    for _ in range(200):
        ids = [rng.randrange(len(tok)) for _ in range(rng.randint(0, 60))] + rng.sample(specials, 2)
        rng.shuffle(ids)
        assert renderer.decode(ids) == tok.decode(ids, skip_special_tokens=False)
        assert renderer.decode(tuple(ids)) == renderer.decode(ids)


def test_decoding_a_prompt_that_extends_a_decoded_one_reads_only_its_new_ids(
    renderer: Renderer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A turn's prompt extends the last: its observation's text is the last text plus the new ids' text.
    text = "<|im_start|>user\nconvert 21°C — ok? 🌡️ ÿ<|im_end|>\n<|im_start|>assistant\n"
    ids = renderer.encode(text)
    decoded: list[int] = []
    real = renderer._decode
    monkeypatch.setattr(renderer, "_decode", lambda part: decoded.append(len(part)) or real(part))
    end = min(ids.index(e) for e in renderer.eos_ids if e in ids) + 1  # the head's end: decoded apart
    for cut in range(1, len(ids)):  # every split, those inside a character's bytes included
        decoded.clear()
        renderer._head_texts.clear()
        head = ids[:cut]
        assert renderer.decode_extending(ids, (head, real(head))) == text
        # only the new ids where that is exact (a byte-level decoder, which OPENENV_FAST_PATHS=0 turns off)
        if not renderer._byte_level:
            assert decoded == [len(ids)]
        elif not real(head).endswith("\ufffd"):
            assert decoded == [len(ids) - cut]
        else:  # the head through the first end-of-turn, then the rest (the next test)
            assert decoded == [end, len(ids) - end]


def test_a_prompt_decoded_without_an_earlier_one_decodes_a_head_seen_before_only_once(
    renderer: Renderer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An episode's first observation: the head (through the first end-of-turn, the system prompt and
    tool schemas every session of a harness shares) is decoded once; later prompts that begin with it,
    from any episode, decode only what follows it, and every text is the whole decode's."""
    head = "<|im_start|>system\nYou fix bugs ✓ 日本 (a head only this test uses)<|im_end|>\n"
    first = renderer.encode(head + "<|im_start|>user\nconvert 21°C 🌡️<|im_end|>\n<|im_start|>assistant\n")
    second = renderer.encode(head + "<|im_start|>user\nanother task<|im_end|>\n<|im_start|>assistant\n")
    cut = min(first.index(e) for e in renderer.eos_ids if e in first) + 1
    assert first[:cut] == second[:cut] and cut < len(first)
    decoded: list[int] = []
    real = renderer._decode
    monkeypatch.setattr(renderer, "_decode", lambda part: decoded.append(len(part)) or real(part))
    other = renderer.encode("<|im_start|>system\nx<|im_end|>\n")
    assert renderer.decode_extending(first, None) == real(first)
    assert renderer.decode_extending(second, (other, real(other))) == real(second)  # `other` no prefix
    assert renderer.decode_extending(first, None) == real(first)
    if renderer._byte_level:  # OPENENV_FAST_PATHS=0 turns it off: then every prompt is decoded whole
        assert decoded == [cut, len(first) - cut, len(second) - cut, len(first) - cut]
    else:
        assert decoded == [len(first), len(second), len(first)]
