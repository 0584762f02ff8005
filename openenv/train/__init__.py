"""TRL integration: GRPO over real harness episodes.

Glossary: a **prompt** names a task (`"pi:fix-binary-search"`); a **group** is the `num_generations`
episodes of one prompt (one harness, compared by GRPO); an **episode** is one harness run in a fresh
sandbox, reduced to one training **row** (`prompt_ids`, `completion_ids`, `logprobs`, `env_mask`) and
its reward components; a **masked** group trains no token (its episodes failed past the retries).
"""

from __future__ import annotations

from openenv.train.episode import TrainingEpisodeResult, run_training_episode
from openenv.train.failures import FailurePolicy, GroupOutcome
from openenv.train.metrics import rollout_metrics
from openenv.train.mix import HarnessMix
from openenv.train.prompts import TaskPrompt, parse_prompt, task_dataset
from openenv.train.rewards import default_reward_funcs, partial_credit, task_success, tool_call_bonus
from openenv.train.rollout import GroupPlan, HarnessRollout, RolloutConfig
from openenv.train.sequences import SequencePolicy, row_weights, select_sequence, trained_rows

__all__ = [
    "EpisodeGRPOTrainer",
    "FailurePolicy",
    "GroupOutcome",
    "GroupPlan",
    "HarnessMix",
    "HarnessRollout",
    "RolloutConfig",
    "SequencePolicy",
    "TaskPrompt",
    "TrainingEpisodeResult",
    "default_reward_funcs",
    "parse_prompt",
    "partial_credit",
    "rollout_metrics",
    "row_weights",
    "run_training_episode",
    "select_sequence",
    "task_dataset",
    "task_success",
    "tool_call_bonus",
    "trained_rows",
]


def __getattr__(name: str) -> object:
    """`EpisodeGRPOTrainer` imports TRL (the `train` extra), so it loads on first use."""
    if name == "EpisodeGRPOTrainer":
        from openenv.train.trainer import EpisodeGRPOTrainer

        return EpisodeGRPOTrainer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
