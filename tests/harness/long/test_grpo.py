"""Two GRPO steps on real long Claude Code episodes (a sub-agent and a compaction each, 4 rows each):
the one that solves the task after its compaction (reward 1) and the one that gives up (reward 0) form a
group. Every row of both trains with its episode's advantage, the rows' weights sum as docs/training.md
says (dapo: 1 per row), and the weights change. The rows' logprobs come from the session's vLLM serving
the same tiny model the trainer starts from, so the first step is on-policy."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from openenv.capture.trajectory import SequenceRow
from openenv.testing.results import episode_result
from openenv.testing.training import train_and_compare
from openenv.train.episode import TrainingEpisodeResult
from openenv.train.failures import GroupOutcome
from openenv.train.rollout import HarnessRollout, RolloutConfig
from tests.harness.long.test_long_episodes import LINEAGE

# `extended` (about 6 minutes of CPU training on ~15k-token rows): every commit still trains GRPO on
# branching episodes (tests/train/test_trainer.py) and on real ones through Ray (tests/executor).
pytestmark = [pytest.mark.slow, pytest.mark.vllm, pytest.mark.extended]


def episode_reward(prompts, completions, episode_reward, **kwargs):
    return list(episode_reward)


def _result(rows: list[SequenceRow], reward: float, policy: Any) -> TrainingEpisodeResult:
    return episode_result(
        rows,
        harness="claude-code",
        task_id="fix-deep-merge",
        sequences=policy,
        reward=reward,
        breakdown={"solved": reward},
        turns=sum(len(r.turn_ids) for r in rows),
    )


def test_two_grpo_steps_on_real_long_claude_code_episodes_train_every_row(
    long_run, claude_gives_up, tiny_model, tmp_path
):
    from types import SimpleNamespace

    from transformers import AutoTokenizer
    from trl import GRPOConfig

    from openenv.train.prompts import task_dataset
    from openenv.train.trainer import EpisodeGRPOTrainer

    solved = long_run("claude-code").log.sequences
    obs, _ = claude_gives_up
    gave_up = list(obs.sequences)
    for rows in (solved, gave_up):
        assert [(r.origin, r.parent) for r in rows] == LINEAGE["claude-code"]
    rollout = HarnessRollout(RolloutConfig())
    batches: list[dict[str, Any]] = []
    seen: list[dict[str, Any]] = []

    def rollout_func(prompts: list[str], trainer: Any) -> dict[str, list[Any]]:
        policy = rollout.sequence_policy(trainer)
        assert policy == "all"
        results = [
            _result(list(solved if i % 2 == 0 else gave_up), 1.0 - i % 2, policy) for i in range(len(prompts))
        ]
        size = trainer.num_generations
        plans = [SimpleNamespace(prompt=prompts[s]) for s in range(0, len(prompts), size)]
        outcomes = [GroupOutcome(results[s : s + size], [1] * size) for s in range(0, len(prompts), size)]
        batches.append(rollout.to_batch(plans, outcomes, trainer))
        return batches[-1]

    rollout_func.__name__ = "long_claude_rollout"  # type: ignore[attr-defined]

    class Recording(EpisodeGRPOTrainer):
        def _generate_and_score_completions(self, inputs):
            batch = super()._generate_and_score_completions(inputs)
            seen.append({k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in batch.items()})
            return batch

    torch.set_num_threads(2)
    # One generation of one group (the two episodes, 8 rows), split into 2 optimizer steps of 4 rows:
    # each real row (up to ~15k tokens with padding) is trained once.
    args = GRPOConfig(
        output_dir=str(tmp_path),
        use_cpu=True,
        per_device_train_batch_size=1,
        num_generations=2,
        steps_per_generation=2,
        max_steps=2,
        learning_rate=1e-2,
        beta=0.0,
        loss_type="dapo",
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        gradient_checkpointing=False,
        seed=0,
    )
    trainer = Recording(
        model=str(tiny_model),
        processing_class=AutoTokenizer.from_pretrained(tiny_model),
        args=args,
        train_dataset=task_dataset(["fix-deep-merge"], repeat=4),
        rollout_func=rollout_func,
        reward_funcs=[episode_reward],
    )
    changed = train_and_compare(trainer, rollout.close)
    assert trainer.state.global_step == 2
    assert changed, "the weights changed"

    b, batch = seen[0], batches[0]
    keys = [
        (tuple(p[pm.bool()].tolist()), tuple(c[cm.bool()].tolist()))
        for p, pm, c, cm in zip(
            b["prompt_ids"], b["prompt_mask"], b["completion_ids"], b["completion_mask"], strict=True
        )
    ]
    key = lambda row: (tuple(row.prompt_ids), tuple(row.completion_ids))
    # The two episodes are the same up to their compaction (the policy is scripted): those rows appear
    # once per episode, with opposite advantages. Each row of each episode is one row of the batch.
    expected = [key(r) for r in (*solved, *gave_up)]
    assert sorted(keys) == sorted(expected), "every sequence of every episode is exactly one trained row"
    # An episode's advantage: the one on its own resumed conversation (the rows that differ).
    advantage = [float(b["advantages"][keys.index(key(rows[-1]))]) for rows in (solved, gave_up)]
    assert advantage[0] > 0 > advantage[1], advantage
    for i, rows in enumerate((solved, gave_up)):
        weights = [batch["row_weight"][i]] + [r["weight"] for r in batch["branch_rows"][i]]
        assert sum(weights) == pytest.approx(len(rows)), "dapo: weight 1 per row, an episode sums to its rows"
    for k in set(expected):
        got = sorted(round(float(b["advantages"][j]), 5) for j, x in enumerate(keys) if x == k)
        want = sorted(
            round(advantage[i], 5) for i, rows in enumerate((solved, gave_up)) for r in rows if key(r) == k
        )
        assert got == want, "every row carries its episode's advantage (x its weight, 1 under dapo)"
    trained = int((b["completion_mask"] * b["tool_mask"]).sum())
    assert trained == sum(sum(r.env_mask) for r in (*solved, *gave_up)) == int(b["num_items_in_batch"])
