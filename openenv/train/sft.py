"""Supervised fine-tuning on recorded harness episodes: the first stage of `research/learning/learning.md`.

The rows are the token export of `openenv export --shape tokens` (one row per training sequence, as the
proxy captured it): `input_ids = prompt_ids + completion_ids`, and the loss is on the tokens the policy
sampled only (`completion_mask = [0] * len(prompt_ids) + env_mask`), so the tool results and chat-template
glue the harness sent back are context, never targets. TRL's `SFTTrainer` builds the labels from
`completion_mask` (`completion_only_loss=True`); the trainer, its loss and its optimizer are TRL's own.
"""

from __future__ import annotations

import json
import time
from collections.abc import Collection
from pathlib import Path
from typing import Any

__all__ = ["sft_dataset", "train_sft"]


def sft_dataset(tokens: Path, *, min_reward: float = 1.0, tasks: Collection[str] | None = None) -> Any:
    """The SFT rows of a token export folder (`OUT/tokens`, or its `tokens.parquet`), keeping the
    sequences of episodes that scored at least `min_reward` (the oracle's all do; a failed episode is
    not a demonstration), of the given `tasks` only when they are named.

    Raises:
        ValueError: no row is left.
    """
    from datasets import Dataset, load_from_disk

    data = (
        Dataset.from_parquet(str(tokens)) if str(tokens).endswith(".parquet") else load_from_disk(str(tokens))
    )
    rows = [
        {
            "input_ids": [*r["prompt_ids"], *r["completion_ids"]],
            "completion_mask": [0] * len(r["prompt_ids"]) + [int(m) for m in r["env_mask"]],
        }
        for r in data
        if r["reward"] >= min_reward and any(r["env_mask"]) and (tasks is None or r["task"] in tasks)
    ]
    if not rows:
        raise ValueError(
            f"{tokens}: no sequence of an episode with reward >= {min_reward} and a sampled token"
        )
    return Dataset.from_list(rows)


def train_sft(
    model: Path,
    dataset: Any,
    out: Path,
    *,
    epochs: float = 5,
    learning_rate: float = 6e-3,
    batch_size: int = 2,
    seed: int = 0,
) -> dict[str, Any]:
    """Train `model` on `dataset` (rows of `sft_dataset`) and save the result to `out`; returns TRL's log
    history and the wall time (also written to `out/sft_metrics.json`)."""
    from transformers import AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    tokenizer = AutoTokenizer.from_pretrained(model)
    args = SFTConfig(
        output_dir=str(out / "trainer"),
        use_cpu=True,
        num_train_epochs=epochs,
        per_device_train_batch_size=batch_size,
        learning_rate=learning_rate,
        lr_scheduler_type="cosine",
        warmup_steps=5,
        weight_decay=0.0,
        completion_only_loss=True,
        max_length=None,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        seed=seed,
        dataset_num_proc=None,
    )
    trainer = SFTTrainer(model=str(model), args=args, train_dataset=dataset, processing_class=tokenizer)
    start = time.monotonic()
    trainer.train()
    wall = time.monotonic() - start
    trainer.save_model(str(out))
    tokenizer.save_pretrained(str(out))
    metrics = {
        "wall_s": wall,
        "rows": len(dataset),
        "epochs": epochs,
        "learning_rate": learning_rate,
        "batch_size": batch_size,
        "log": [h for h in trainer.state.log_history if "loss" in h],
    }
    (out / "sft_metrics.json").write_text(json.dumps(metrics, indent=1))
    return metrics
