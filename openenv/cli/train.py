"""`openenv train grpo`: GRPO over real harness episodes from the command line (the recipe in openenv.train.recipe).

Heavy imports (torch, transformers, trl) stay inside the command body so `openenv --help` stays fast.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from openenv.capture.backends.named import BackendName

__all__ = ["grpo", "register"]

train_app = typer.Typer(help="Train a model with RL inside real harnesses (TRL GRPO).", no_args_is_help=True)


@train_app.command()
def grpo(
    task: Annotated[list[str], typer.Option(help="Task id (repeatable); one GRPO prompt each.")] = [  # noqa: B006
        "fix-temperature-conversion"
    ],
    harness: Annotated[
        str, typer.Option(help="A harness or a weighted mix, e.g. 'pi=2,claude-code=1'.")
    ] = "pi",
    model: Annotated[str | None, typer.Option(help="Model folder (default: the repo's tiny model).")] = None,
    backend: Annotated[str, typer.Option(help="local (the trainer's own model) or vllm.")] = "local",
    vllm_url: Annotated[str | None, typer.Option(help="vLLM base URL for --backend vllm.")] = None,
    steps: Annotated[int, typer.Option(help="Optimizer steps.")] = 20,
    num_generations: Annotated[int, typer.Option(help="Episodes per group.")] = 4,
    max_tokens: Annotated[int, typer.Option(help="Cap on each sampled turn.")] = 24,
    lr: Annotated[float, typer.Option(help="Learning rate.")] = 2e-2,
    rewards: Annotated[
        str, typer.Option(help="task, or task+plain_text (adds the warm-up shaping term).")
    ] = "task",
    bonus_scale: Annotated[float, typer.Option(help="Tool-call bonus for a zero-call solve.")] = 0.5,
    max_retries: Annotated[
        int, typer.Option(help="Retries of a failed episode before its group is masked.")
    ] = 2,
    out: Annotated[
        str, typer.Option(help="Output folder (metrics.json, reward_curve.png).")
    ] = ".cache/runs/grpo",
) -> None:
    """Run GRPO and write metrics.json and reward_curve.png."""
    from pydantic import ValidationError

    from openenv.capture.backends.vllm_engines import split_urls
    from openenv.capture.engine import EngineSpec
    from openenv.core.validation import validation_message
    from openenv.train.failures import FailurePolicy
    from openenv.train.recipe import GRPORecipe, train_grpo
    from openenv.train.rollout import RolloutConfig

    try:
        rollout = RolloutConfig.model_validate(  # max_tokens: a flat settings word, folded into `episode`
            {
                "harness": harness,
                "engine": EngineSpec(_backend(backend), vllm_urls=split_urls(vllm_url)),
                "max_tokens": max_tokens,
                "max_concurrency": num_generations,
                "failure": FailurePolicy(max_retries=max_retries),
            }
        )
        recipe = GRPORecipe.model_validate(  # the CLI's strs, validated into the recipe's Literals
            {
                "model": model,
                "tasks": task,
                "steps": steps,
                "num_generations": num_generations,
                "learning_rate": lr,
                "rewards": rewards,
                "bonus_scale": bonus_scale,
                "output_dir": out,
                "rollout": rollout,
            }
        )
    except ValidationError as exc:
        raise typer.BadParameter(validation_message(exc, "option")) from None
    metrics = train_grpo(recipe)
    typer.echo(json.dumps({k: v for k, v in metrics.items() if k != "steps"}, indent=2))


def _backend(name: str) -> BackendName:
    from openenv.capture.backends.named import BACKEND_NAMES

    if name not in BACKEND_NAMES:
        raise typer.BadParameter(f"--backend must be {' or '.join(BACKEND_NAMES)}, not {name!r}")
    return name


def register(app: typer.Typer) -> None:
    app.add_typer(train_app, name="train")
