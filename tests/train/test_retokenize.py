"""The no-splice baseline: a row re-tokenized from its text, as a text-in/text-out proxy hands it over."""

from __future__ import annotations

from pathlib import Path

from openenv.train.retokenize import retokenize_row


def test_a_canonical_row_is_unchanged_and_a_non_canonical_split_is_not(tiny_model: Path) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model)
    prompt = tok.encode("<|im_start|>user\nCreate notes.txt<|im_end|>\n<|im_start|>assistant\n")
    said = tok.encode("echo piano > notes.txt")
    glue = tok.encode("<|im_end|>\n<|im_start|>user\n(no output)<|im_end|>\n<|im_start|>assistant\n")
    done = tok.encode("done<|im_end|>")
    row = {
        "prompt_ids": prompt,
        "completion_ids": said + glue + done,
        "logprobs": [-0.5] * len(said + glue + done),
        "env_mask": [1] * len(said) + [0] * len(glue) + [1] * len(done),
    }
    same, sampled, changed = retokenize_row(row, tok)
    assert same == row and sampled == len(said) + len(done) and changed == 0

    # The engine sampled "piano" as single characters: the same text, other ids.
    letters = [tok.convert_tokens_to_ids(c) for c in "piano"]
    head = tok.encode("echo ") if tok.decode(tok.encode("echo ")) == "echo " else tok.encode("echo")
    odd = [*head, *letters, *tok.encode(" > notes.txt")]
    assert tok.decode(odd) == tok.decode(said) and odd != said
    row = {
        **row,
        "completion_ids": odd + glue + done,
        "logprobs": [-0.5] * len(odd + glue + done),
        "env_mask": [1] * len(odd) + [0] * len(glue) + [1] * len(done),
    }
    new, sampled, changed = retokenize_row(row, tok)
    assert changed == len(odd) and sampled == len(odd) + len(done)
    assert new["completion_ids"] == tok.encode(tok.decode(odd)) + glue + done
    assert new["env_mask"] == [1] * len(new["completion_ids"][: -len(glue + done)]) + [0] * len(glue) + [
        1
    ] * len(done)
    assert len(new["logprobs"]) == len(new["completion_ids"])
    assert new["logprobs"][: -len(glue + done)] == [0.0] * (len(new["completion_ids"]) - len(glue + done))
