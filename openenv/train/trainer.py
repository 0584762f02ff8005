"""`EpisodeGRPOTrainer`: TRL's `GRPOTrainer`, extended so that every sequence of an episode trains.

TRL computes group advantages over exactly one completion per generation (`rewards.view(-1, G)`). An
agent episode can hold several sequences (a compaction, sub-agents, forks; see `sequences.py`), all
sampled by the policy and all judged by the episode's one reward. `HarnessRollout` therefore returns
the usual one row per generation (the primary sequence) and puts the episode's other sequences in the
`branch_rows` column, with each row's loss weight (`row_weight`, `branch_rows[i]["weight"]`).

This subclass lets TRL do everything it does for the primary rows (rewards, group baselines, logging),
then:
1. scales each primary row's advantage by its weight;
2. appends each branch row with its episode's advantage times its weight, computing for it whatever
   TRL computed per row (old logprobs, reference logprobs, vLLM importance-sampling ratios);
3. recomputes `num_items_in_batch` over all rows, and pads the batch with zero-loss rows up to a
   multiple of `steps_per_generation` (TRL splits the batch in equal parts and would drop a remainder).

Everything else (loss, clipping, optimizer) is TRL's own code. Single-process and multi-process both
work: each process appends the branches of its own generations. Multimodal inputs are not supported
with branch rows (harness episodes are text).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
from trl import GRPOConfig, GRPOTrainer

from openenv.errors import BadRequest

__all__ = ["EpisodeGRPOTrainer"]

_PER_TOKEN = (
    "completion_ids",
    "completion_mask",
    "tool_mask",
    "sampling_per_token_logps",
    "old_per_token_logps",
    "ref_per_token_logps",
)
_MULTIMODAL = (
    "pixel_values",
    "image_grid_thw",
    "pixel_attention_mask",
    "spatial_shapes",
    "image_sizes",
    "token_type_ids",
    "mm_token_type_ids",
    "image_position_ids",
    "num_images",
)


class EpisodeGRPOTrainer(GRPOTrainer):
    """A `GRPOTrainer` that trains the `branch_rows` a `HarnessRollout` returns (see the module doc).

    Takes exactly `GRPOTrainer`'s arguments. With a rollout that returns no `branch_rows` it behaves
    like `GRPOTrainer`.
    """

    trains_branch_rows = True  # HarnessRollout checks this to choose the `all` sequence policy
    args: GRPOConfig  # what GRPOTrainer keeps there (typed by transformers' Trainer as its base class)

    def _generate(self, prompts: list[Any]) -> Any:
        out = super()._generate(prompts)
        extra_fields = out[5]
        self._branch_rows = extra_fields.pop("branch_rows", None)
        self._row_weights = extra_fields.pop("row_weight", None)
        return out

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        self._branch_rows = self._row_weights = None
        out = super()._generate_and_score_completions(inputs)
        branches, weights = self._branch_rows, self._row_weights
        self._branch_rows = self._row_weights = None
        if weights is None and not branches:
            return out
        device = out["advantages"].device
        base = out["advantages"]
        if weights is not None:
            out["advantages"] = base * torch.tensor(weights, dtype=base.dtype, device=device)
        rows = [
            (float(base[i]) * float(b.get("weight", 1.0)), b)
            for i, bs in enumerate(branches or [])
            for b in bs
        ]
        train = self.model is not None and self.model.training
        steps = self.args.steps_per_generation or 1  # GRPOConfig's __post_init__ always sets it
        fill = (-(len(base) + len(rows))) % steps if train else 0
        if not rows and not fill:
            return out
        if any(k in out for k in _MULTIMODAL):
            raise BadRequest("branch rows are not supported with multimodal inputs; use sequences='longest'")
        return self._append(out, rows, fill)

    # ---- internals --------------------------------------------------------------------------------------

    def _append(
        self, out: dict[str, Any], rows: Sequence[tuple[float, dict[str, Any]]], fill: int
    ) -> dict[str, Any]:
        device = out["advantages"].device
        pad_id = self._tokenizer.pad_token_id if self._tokenizer.pad_token_id is not None else 0
        prompts = [list(r["prompt_ids"]) for _, r in rows] + [[pad_id]] * fill
        completions = [list(r["completion_ids"]) for _, r in rows] + [[pad_id]] * fill
        env_masks = [list(r["env_mask"]) for _, r in rows] + [[0]] * fill
        logprobs = [list(r["logprobs"]) for _, r in rows] + [[0.0]] * fill
        advantages = [a for a, _ in rows] + [0.0] * fill
        if self.mask_truncated_completions:
            eos_and_pad = {*self.eos_token_ids, pad_id}
            env_masks = [
                m if ids and ids[-1] in eos_and_pad else [0] * len(m)
                for ids, m in zip(completions, env_masks, strict=True)
            ]
        width_c = max(len(c) for c in completions)
        new: dict[str, torch.Tensor] = {
            "prompt_ids": _pad(prompts, pad_id, "left", device),
            "prompt_mask": _pad([[1] * len(p) for p in prompts], 0, "left", device),
            "completion_ids": _pad(completions, pad_id, "right", device, width_c),
            "completion_mask": _pad([[1] * len(c) for c in completions], 0, "right", device, width_c),
            "tool_mask": _pad(env_masks, 0, "right", device, width_c),
            "sampling_per_token_logps": _pad(logprobs, 0.0, "right", device, width_c, torch.float32),
            "advantages": torch.tensor(advantages, dtype=out["advantages"].dtype, device=device),
        }
        self._per_row_terms(out, new)
        merged = _concat(out, new, pad_id)
        loss_mask = merged["completion_mask"] * merged["tool_mask"]
        merged["num_items_in_batch"] = self.accelerator.gather(loss_mask.sum()).sum()
        return merged

    def _per_row_terms(self, out: dict[str, Any], new: dict[str, torch.Tensor]) -> None:
        """What TRL computed for its rows, computed for the new rows the same way."""
        ids = torch.cat([new["prompt_ids"], new["completion_ids"]], dim=1)
        attention = torch.cat([new["prompt_mask"], new["completion_mask"]], dim=1)
        keep = new["completion_ids"].size(1)
        training = self.model is not None and self.model.training
        size = self.args.per_device_train_batch_size if training else self.args.per_device_eval_batch_size
        with torch.no_grad():
            if "old_per_token_logps" in out:
                new["old_per_token_logps"] = self._get_per_token_logps_and_entropies(
                    self.model, ids, attention, keep, batch_size=size
                )[0]
            if "ref_per_token_logps" in out:
                if self.ref_model is None:
                    raise BadRequest(
                        "branch rows with beta != 0 need a reference model (not a PEFT adapter); "
                        "use sequences='longest'"
                    )
                new["ref_per_token_logps"] = self._get_per_token_logps_and_entropies(
                    self.ref_model, ids, attention, keep, batch_size=size
                )[0]
        if "importance_sampling_ratio" in out:
            new["importance_sampling_ratio"] = self._is_ratio(
                new, sequence_level=out["importance_sampling_ratio"].size(1) == 1
            )

    def _is_ratio(self, new: dict[str, torch.Tensor], *, sequence_level: bool) -> torch.Tensor:
        """TRL's vLLM importance-sampling ratio (same modes and clip bounds) for the new rows."""
        mask = new["completion_mask"] * new["tool_mask"]
        diff = torch.nan_to_num(
            (new["old_per_token_logps"] - new["sampling_per_token_logps"]) * mask, nan=0.0
        )
        ratio = torch.exp(diff.sum(dim=-1, keepdim=True) if sequence_level else diff)
        lo, hi = self.vllm_importance_sampling_clip_min, self.vllm_importance_sampling_clip_max
        if self.vllm_importance_sampling_mode.endswith("truncate"):
            return torch.clamp(ratio, min=lo, max=hi)
        lo = -math.inf if lo is None else lo
        hi = math.inf if hi is None else hi
        return ratio.masked_fill((ratio < lo) | (ratio > hi), 0.0)


def _pad(
    rows: Sequence[Sequence[Any]],
    value: Any,
    side: str,
    device: Any,
    width: int | None = None,
    dtype: torch.dtype = torch.long,
) -> torch.Tensor:
    width = max(len(r) for r in rows) if width is None else width
    padded = [
        ([value] * (width - len(r)) + list(r)) if side == "left" else (list(r) + [value] * (width - len(r)))
        for r in rows
    ]
    return torch.tensor(padded, dtype=dtype, device=device)


def _widen(t: torch.Tensor, width: int, value: Any, side: str) -> torch.Tensor:
    if t.size(1) >= width:
        return t
    pad = t.new_full((t.size(0), width - t.size(1)), value)
    return torch.cat([pad, t] if side == "left" else [t, pad], dim=1)


def _concat(out: dict[str, Any], new: dict[str, torch.Tensor], pad_id: int) -> dict[str, Any]:
    """TRL's rows followed by the new ones, every per-token tensor padded to a common width."""
    merged = dict(out)
    width_p = max(out["prompt_ids"].size(1), new["prompt_ids"].size(1))
    for key, value in (("prompt_ids", pad_id), ("prompt_mask", 0)):
        merged[key] = torch.cat(
            [_widen(out[key], width_p, value, "left"), _widen(new[key], width_p, value, "left")]
        )
    width_c = max(out["completion_ids"].size(1), new["completion_ids"].size(1))
    if "tool_mask" not in out:  # TRL omits it when no row has env tokens: all ones
        merged["tool_mask"] = out["tool_mask"] = torch.ones_like(out["completion_mask"])
    for key in _PER_TOKEN:
        if key in out and out[key] is not None:
            value = pad_id if key == "completion_ids" else 0
            merged[key] = torch.cat(
                [
                    _widen(out[key], width_c, value, "right"),
                    _widen(new[key].to(out[key].dtype), width_c, value, "right"),
                ]
            )
    if "importance_sampling_ratio" in out:
        ratio, extra = out["importance_sampling_ratio"], new["importance_sampling_ratio"]
        if ratio.size(1) != 1:
            ratio, extra = _widen(ratio, width_c, 1.0, "right"), _widen(extra, width_c, 1.0, "right")
        merged["importance_sampling_ratio"] = torch.cat([ratio, extra.to(ratio.dtype)])
    merged["advantages"] = torch.cat([out["advantages"], new["advantages"]])
    return merged
