"""Driver (runs inside the cluster's namespace): 2 GRPO steps whose episodes run on Ray workers.

argv: tiny model folder, vLLM URL, output folder. Prints one JSON line: steps, whether the weights
changed, and the node of every episode.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from transformers import AutoTokenizer
from trl import GRPOConfig, GRPOTrainer

from openenv.capture.engine import EngineSpec
from openenv.testing.training import train_and_compare
from openenv.train.prompts import task_dataset
from openenv.train.rewards import default_reward_funcs
from openenv.train.rollout import HarnessRollout, RolloutConfig

model, url, out = sys.argv[1:4]
rollout = HarnessRollout(
    RolloutConfig(
        harness="pi",
        engine=EngineSpec.of("vllm", model=model, vllm_url=url),
        max_tokens=16,
        executor="ray",
        ray_address="auto",
        sequences="longest",
    ),
    policy_for=lambda i: "oracle" if i == 0 else "sample",
)
nodes: list[str] = []


def recorded(prompts: list[str], trainer: Any) -> dict[str, list[Any]]:
    batch = rollout(prompts, trainer)
    nodes.extend(batch["node"])
    return batch


recorded.__name__ = "recorded"
args = GRPOConfig(
    output_dir=out,
    use_cpu=True,
    per_device_train_batch_size=2,
    num_generations=2,
    steps_per_generation=2,
    max_steps=2,
    learning_rate=1e-2,
    beta=0.0,
    logging_steps=1,
    report_to="none",
    save_strategy="no",
    gradient_checkpointing=False,
    seed=0,
)
trainer = GRPOTrainer(
    model=model,
    processing_class=AutoTokenizer.from_pretrained(model),
    args=args,
    train_dataset=task_dataset(["fix-temperature-conversion"], repeat=8),
    rollout_func=recorded,
    reward_funcs=default_reward_funcs(bonus_scale=0.5),
)
changed = train_and_compare(trainer, rollout.close)
print(json.dumps({"steps": trainer.state.global_step, "changed": changed, "nodes": nodes}))
