"""A GRPO training run from one config: the recipe `examples/train_grpo_cpu.py` and `openenv train grpo` run.

It wires a `HarnessRollout` into `EpisodeGRPOTrainer` (TRL's `GRPOTrainer`, training every sequence) on
CPU, then writes what a reader needs to judge the run: `metrics.json` (TRL's log history plus wall time
per step) and `reward_curve.png`.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from openenv.train.rewards import RewardFunc, partial_credit, plain_text, task_success, tool_call_bonus
from openenv.train.rollout import HarnessRollout, RolloutConfig

__all__ = ["GRPORecipe", "plot_reward_curve", "reward_funcs_for", "train_grpo"]

RewardSet = Literal["task", "task+plain_text"]


class GRPORecipe(BaseModel):
    """One training run.

    Args:
        model: the model folder (default: the repo's tiny model).
        tasks: task ids of the dataset (each one GRPO prompt).
        rollout: the episodes' settings (harness or mix, backend, max tokens, concurrency, failures).
        steps: optimizer steps.
        num_generations: episodes per group.
        learning_rate: Adam's step size.
        rewards: `task` (success, partial credit, tool-call bonus) or `task+plain_text` (adds the
            warm-up shaping term a random model can improve on; see `rewards.plain_text`).
        bonus_scale: the tool-call bonus for a zero-call solve.
        output_dir: where metrics.json and reward_curve.png go.
        seed: the trainer's seed.
    """

    model_config = ConfigDict(extra="forbid")

    model: str | None = None
    tasks: list[str] = Field(default_factory=lambda: ["fix-temperature-conversion"], min_length=1)
    rollout: RolloutConfig = RolloutConfig(max_tokens=24)
    steps: int = Field(default=20, gt=0)
    num_generations: int = Field(default=4, ge=2)
    learning_rate: float = Field(default=2e-2, gt=0)
    rewards: RewardSet = "task+plain_text"
    bonus_scale: float = Field(default=0.5, ge=0)
    output_dir: str = ".cache/runs/grpo-cpu"
    seed: int = 0


def reward_funcs_for(recipe: GRPORecipe) -> list[RewardFunc]:
    funcs = [task_success, partial_credit, tool_call_bonus(recipe.bonus_scale)]
    return [*funcs, plain_text] if recipe.rewards == "task+plain_text" else funcs


def train_grpo(recipe: GRPORecipe) -> dict[str, Any]:
    """Train, then write metrics.json and reward_curve.png under `output_dir`; returns the metrics."""
    from transformers import AutoTokenizer
    from trl import GRPOConfig

    from openenv.models import tiny_model_path
    from openenv.train.prompts import task_dataset
    from openenv.train.trainer import EpisodeGRPOTrainer

    model = recipe.model or str(tiny_model_path())
    out = Path(recipe.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    sampling = recipe.rollout.episode.sampling
    assert sampling is not None and sampling.temperature is not None  # RolloutConfig refuses a run without
    args = GRPOConfig(
        output_dir=str(out / "trainer"),
        use_cpu=True,
        per_device_train_batch_size=recipe.num_generations,
        num_generations=recipe.num_generations,
        max_steps=recipe.steps,
        learning_rate=recipe.learning_rate,
        beta=0.0,
        temperature=sampling.temperature,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        gradient_checkpointing=False,
        seed=recipe.seed,
    )
    rollout = HarnessRollout(recipe.rollout)
    trainer = EpisodeGRPOTrainer(
        model=model,
        processing_class=AutoTokenizer.from_pretrained(model),
        args=args,
        train_dataset=task_dataset(recipe.tasks, repeat=recipe.steps * recipe.num_generations),
        reward_funcs=reward_funcs_for(recipe),
        rollout_func=rollout,
    )
    start = time.monotonic()
    try:
        trainer.train()
    finally:
        rollout.close()
    metrics = _summary(recipe, trainer.state.log_history, time.monotonic() - start)
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2))
    plot_reward_curve(metrics["steps"], out / "reward_curve.png")
    return metrics


def _summary(recipe: GRPORecipe, history: list[dict[str, Any]], wall_s: float) -> dict[str, Any]:
    steps = [h for h in history if "reward" in h]
    first, last = steps[: max(len(steps) // 4, 1)], steps[-max(len(steps) // 4, 1) :]

    def mean(rows: list[dict[str, Any]], key: str) -> float:
        return sum(r.get(key) or 0.0 for r in rows) / len(rows)

    return {
        "recipe": recipe.model_dump(mode="json"),
        "wall_s": wall_s,
        "wall_s_per_step": wall_s / max(len(steps), 1),
        "reward_first_quarter": mean(first, "reward"),
        "reward_last_quarter": mean(last, "reward"),
        "steps": steps,
    }


def plot_reward_curve(steps: list[dict[str, Any]], path: Path) -> Path:
    """Total reward and each reward component per step."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    xs = [s["step"] for s in steps]
    ax.plot(xs, [s["reward"] for s in steps], marker="o", label="reward (sum)")
    for key in sorted({k for s in steps for k in s if k.startswith("rewards/") and k.endswith("/mean")}):
        ax.plot(
            xs,
            [s.get(key) for s in steps],
            linestyle="--",
            label=key.removeprefix("rewards/").removesuffix("/mean"),
        )
    ax.set_xlabel("GRPO step")
    ax.set_ylabel("mean reward")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
