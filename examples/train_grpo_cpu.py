"""Train the repo's tiny model with GRPO on CPU, through the real `pi` harness, for 20 steps.

    .venv/bin/python examples/train_grpo_cpu.py [--steps 20] [--harness pi] [--out .cache/runs/grpo-cpu]

Every step runs `num_generations` real pi episodes on a built-in task; the proxy samples each turn
from the trainer's in-memory model (the `local` backend), so every step samples the current weights.

The reward, honestly: a random-weight model never fixes the bug, so task success and partial credit
stay 0 and give no signal. The run adds a warm-up shaping term, `plain_text` (the fraction of the
reply that is ASCII letters and spaces), which varies between samples from step 0 and which GRPO can
raise within 20 steps. It shows the loop (harness -> proxy -> rollout_func -> GRPO update -> fresh
samples) learning; it is not evidence of coding ability. Outputs: metrics.json and reward_curve.png.
"""

from __future__ import annotations

import argparse
import json

from openenv.train.recipe import GRPORecipe, train_grpo
from openenv.train.rollout import RolloutConfig


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--harness", default="pi", help="a harness or a mix, e.g. 'pi=2,claude-code=1'")
    parser.add_argument("--task", default="fix-temperature-conversion")
    parser.add_argument("--num-generations", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=24)
    parser.add_argument("--lr", type=float, default=2e-2)
    parser.add_argument("--out", default=".cache/runs/grpo-cpu")
    args = parser.parse_args()
    recipe = GRPORecipe(
        tasks=[args.task],
        steps=args.steps,
        num_generations=args.num_generations,
        learning_rate=args.lr,
        rollout=RolloutConfig(
            harness=args.harness, max_tokens=args.max_tokens, max_concurrency=args.num_generations
        ),
        output_dir=args.out,
    )
    metrics = train_grpo(recipe)
    print(json.dumps({k: v for k, v in metrics.items() if k != "steps"}, indent=2))
    for step in metrics["steps"]:
        print(
            f"step {step['step']:>3}  reward {step['reward']:.3f}  plain_text {step.get('rewards/plain_text/mean', 0):.3f}"
            f"  step_time {step.get('step_time', 0):.1f}s"
        )


if __name__ == "__main__":
    main()
