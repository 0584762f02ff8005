"""The no-splice baseline: training rows re-tokenized from their text, as a text-in/text-out proxy makes them.

A proxy that keeps only text hands the trainer `tokenizer(text)`, not the ids the engine sampled. Byte-level
BPE has many token sequences per string, and a sampled sequence is often not the canonical one, so the
re-tokenized row trains tokens the policy never sampled (and misses some it did). `RetokenizedRollout`
produces exactly those rows from the exact ones, so the two can be compared in one recipe
(`research/learning/learning.md`): the prompt and every run of equal `env_mask` are decoded and encoded again; the
model runs keep mask 1, the tool results and template glue 0. A naive proxy has no logprobs for
re-tokenized tokens: a run that re-tokenizes to other ids gets 0.0 (TRL's loss does not read them with
the in-process `local` backend; its vLLM importance-sampling correction would). The share of sampled
tokens in a run (a reply) that re-tokenized to other ids is logged as `rollout/retokenized_changed`.

Not modelled: a naive proxy also re-renders tool calls from the harness's echoed JSON (pi echoes
`{"command":"..."}` where the model sampled `{"command": "..."}`), which changes more tokens still.
"""

from __future__ import annotations

from typing import Any

from openenv.train.rollout import HarnessRollout

__all__ = ["RetokenizedRollout", "retokenize_row"]


def _runs(mask: list[int]) -> list[tuple[int, int, int]]:
    """(start, end, value) of each run of equal values."""
    runs, start = [], 0
    for i in range(1, len(mask) + 1):
        if i == len(mask) or mask[i] != mask[start]:
            runs.append((start, i, mask[start]))
            start = i
    return runs


def retokenize_row(row: dict[str, Any], tokenizer: Any) -> tuple[dict[str, Any], int, int]:
    """The row as a text proxy would give it; returns (row, sampled tokens, sampled tokens whose run
    re-tokenized to other ids)."""

    def again(ids: list[int]) -> list[int]:
        return list(
            tokenizer.encode(tokenizer.decode(ids, skip_special_tokens=False), add_special_tokens=False)
        )

    completion, logprobs, mask = list(row["completion_ids"]), list(row["logprobs"]), list(row["env_mask"])
    new_ids: list[int] = []
    new_lp: list[float] = []
    new_mask: list[int] = []
    sampled = changed = 0
    for start, end, value in _runs(mask):
        ids = again(completion[start:end])
        same = ids == completion[start:end]
        if value:
            sampled += end - start
            changed += 0 if same else end - start
        new_ids += ids
        new_lp += logprobs[start:end] if same else [0.0] * len(ids)
        new_mask += [value] * len(ids)
    out = {
        **row,
        "prompt_ids": again(list(row["prompt_ids"])),
        "completion_ids": new_ids,
        "logprobs": new_lp,
        "env_mask": new_mask,
    }
    return out, sampled, changed


class RetokenizedRollout(HarnessRollout):
    """`HarnessRollout` whose rows (and branch rows) are re-tokenized from text (`retokenize_row`)."""

    def to_batch(self, plans: Any, outcomes: Any, trainer: Any) -> dict[str, list[Any]]:
        batch = super().to_batch(plans, outcomes, trainer)
        tokenizer = trainer.processing_class
        keys = ("prompt_ids", "completion_ids", "logprobs", "env_mask")
        sampled = changed = 0
        for i in range(len(batch["prompt_ids"])):
            row, s, c = retokenize_row({k: batch[k][i] for k in keys}, tokenizer)
            sampled, changed = sampled + s, changed + c
            for key in keys:
                batch[key][i] = row[key]
            branches = []
            for branch in batch["branch_rows"][i]:
                new, s, c = retokenize_row(branch, tokenizer)
                sampled, changed = sampled + s, changed + c
                branches.append(new)
            batch["branch_rows"][i] = branches
        log = getattr(trainer, "_log_metric", None)
        if log is not None and sampled:
            log("rollout/retokenized_changed", changed / sampled)
        return batch
