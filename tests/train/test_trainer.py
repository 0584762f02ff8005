"""Every sequence of an episode trains: `EpisodeGRPOTrainer` appends the `branch_rows` TRL cannot take.

Episodes here hold 1 to 3 sequences (as after a compaction or with sub-agents). Their tokens are sampled
by the trainer's own tiny model and their logprobs are its teacher-forced ones, so the run is on-policy;
the rollout is `HarnessRollout.to_batch`, the same code the harness rollout returns through. Two GRPO
steps from one generation batch of 2 groups x 2 episodes, split in two optimizer steps.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from openenv.capture.trajectory import SequenceRow
from openenv.testing.results import episode_result
from openenv.testing.training import train_and_compare
from openenv.train.episode import TrainingEpisodeResult
from openenv.train.failures import GroupOutcome
from openenv.train.rollout import HarnessRollout, RolloutConfig

SEQUENCES_PER_EPISODE = (
    1,
    3,
    2,
    1,
)  # 7 rows for 4 generations: one zero-loss filler row makes it 8 (2 steps)
REWARDS = (1.0, 0.0, 0.25, 0.75)


class BranchingRollout:
    """A rollout_func whose episodes have several sequences each, sampled by the trainer's model."""

    def __init__(self) -> None:
        self.rollout = HarnessRollout(RolloutConfig())
        self.episodes: list[TrainingEpisodeResult] = []
        self.batches: list[dict[str, list[Any]]] = []
        self.__name__ = "branching_rollout"

    def __call__(self, prompts: list[str], trainer: Any) -> dict[str, list[Any]]:
        policy = self.rollout.sequence_policy(trainer)
        results = []
        for i, _ in enumerate(prompts):
            rows = [self._sequence(trainer, i, j) for j in range(SEQUENCES_PER_EPISODE[i % 4])]
            results.append(
                episode_result(
                    rows,
                    sequences=policy,
                    reward=REWARDS[i % 4],
                    breakdown={"solved": REWARDS[i % 4]},
                    turns=len(rows),
                )
            )
        self.episodes = results
        size = trainer.num_generations
        plans = [SimpleNamespace(prompt=prompts[s]) for s in range(0, len(prompts), size)]
        outcomes = [GroupOutcome(results[s : s + size], [1] * size) for s in range(0, len(prompts), size)]
        batch = self.rollout.to_batch(plans, outcomes, trainer)
        self.batches.append(batch)
        return batch

    @staticmethod
    def _sequence(trainer: Any, episode: int, index: int) -> SequenceRow:
        """prompt -> 4 sampled tokens -> 2 env tokens -> 3 sampled tokens, logprobs teacher-forced."""
        tok = trainer.processing_class
        prompt = tok.encode(f"episode {episode} sequence {index}:")
        model = trainer.model
        with torch.no_grad():
            first = model.generate(
                torch.tensor([prompt]), max_new_tokens=4, min_new_tokens=4, do_sample=True
            )[0]
            env = tok.encode(" ok")[:2] or [1, 2]
            ids = first.tolist() + env
            second = model.generate(torch.tensor([ids]), max_new_tokens=3, min_new_tokens=3, do_sample=True)[
                0
            ]
        completion = second.tolist()[len(prompt) :]
        full = torch.tensor([prompt + completion])
        with torch.no_grad():
            logps = trainer._get_per_token_logps_and_entropies(
                model, full, torch.ones_like(full), len(completion)
            )[0]
        mask = [1] * 4 + [0] * len(env) + [1] * 3
        logprobs = [lp if m else 0.0 for lp, m in zip(logps[0].tolist(), mask, strict=True)]
        return SequenceRow(
            prompt_ids=prompt,
            completion_ids=completion,
            logprobs=logprobs,
            env_mask=mask,
            turn_ids=[f"{episode}.{index}"],
        )


def episode_reward(prompts, completions, episode_reward, **kwargs):
    return list(episode_reward)


def _train(tiny_model: Path, out: Path, trainer_cls: type, loss_type: str) -> SimpleNamespace:
    from transformers import AutoTokenizer
    from trl import GRPOConfig

    from openenv.train.prompts import task_dataset

    seen: list[dict[str, Any]] = []

    class Recording(trainer_cls):  # type: ignore[valid-type, misc]
        def _generate_and_score_completions(self, inputs):
            batch = super()._generate_and_score_completions(inputs)
            seen.append({k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in batch.items()})
            return batch

    rollout = BranchingRollout()
    args = GRPOConfig(
        output_dir=str(out),
        use_cpu=True,
        per_device_train_batch_size=2,
        num_generations=2,
        steps_per_generation=2,
        max_steps=2,
        learning_rate=1e-2,
        beta=0.0,
        loss_type=loss_type,
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
        train_dataset=_dataset(task_dataset),
        rollout_func=rollout,
        reward_funcs=[episode_reward],
    )
    changed = train_and_compare(trainer, rollout.rollout.close)
    return SimpleNamespace(
        trainer=trainer, rollout=rollout, changed=changed, batch=seen[0], logs=trainer.state.log_history
    )


def _dataset(task_dataset: Any) -> Any:
    return task_dataset(["fix-temperature-conversion", "fix-binary-search"], repeat=4)


@pytest.fixture(scope="module", params=["dapo", "grpo"])
def run(request, tiny_model: Path, tmp_path_factory) -> SimpleNamespace:
    from openenv.train.trainer import EpisodeGRPOTrainer

    return _train(tiny_model, tmp_path_factory.mktemp("grpo"), EpisodeGRPOTrainer, request.param)


def _row_key(
    prompt: torch.Tensor, pmask: torch.Tensor, completion: torch.Tensor, cmask: torch.Tensor
) -> tuple:
    return tuple(prompt[pmask.bool()].tolist()), tuple(completion[cmask.bool()].tolist())


def test_two_grpo_steps_on_branching_episodes_change_the_weights(run):
    assert run.trainer.state.global_step == 2
    assert run.changed


def test_every_sequence_of_every_episode_is_one_row_of_the_trained_batch(run):
    b = run.batch
    keys = [
        _row_key(*t)
        for t in zip(
            b["prompt_ids"], b["prompt_mask"], b["completion_ids"], b["completion_mask"], strict=True
        )
    ]
    expected = [(tuple(r.prompt_ids), tuple(r.completion_ids)) for e in run.rollout.episodes for r in e.rows]
    assert len(expected) == sum(SEQUENCES_PER_EPISODE)
    for key in expected:
        assert keys.count(key) == 1, "each sequence trains exactly once"
    filler = [i for i, k in enumerate(keys) if k not in expected]
    assert len(keys) == 8 and len(filler) == 1, "7 rows + 1 zero-loss row for 2 equal micro-batches"
    assert b["tool_mask"][filler[0]].sum() == 0 and b["advantages"][filler[0]] == 0
    trained = int((b["completion_mask"] * b["tool_mask"]).sum())
    assert trained == sum(e.tokens_sampled for e in run.rollout.episodes) == int(b["num_items_in_batch"])


def test_rows_of_an_episode_share_its_advantage_and_their_weights_sum_as_documented(run):
    b, loss_type = run.batch, run.trainer.loss_type
    keys = [
        _row_key(*t)
        for t in zip(
            b["prompt_ids"], b["prompt_mask"], b["completion_ids"], b["completion_mask"], strict=True
        )
    ]
    batch = run.rollout.batches[0]
    for i, episode in enumerate(run.rollout.episodes):
        weights = [batch["row_weight"][i]] + [r["weight"] for r in batch["branch_rows"][i]]
        k = len(episode.rows)
        assert sum(weights) == pytest.approx(k if loss_type == "dapo" else 1.0)
        per_weight = {
            round(float(b["advantages"][keys.index((tuple(r.prompt_ids), tuple(r.completion_ids)))]) / w, 6)
            for r, w in zip(episode.rows, weights, strict=True)
        }
        assert len(per_weight) == 1, f"episode {i}: its rows carry one advantage, {per_weight}"
    assert any(abs(float(a)) > 1e-3 for a in b["advantages"])


def test_tokens_trained_over_sampled_is_one_and_is_logged_per_harness(run):
    assert all(e.trained_ratio == 1.0 and e.dropped_sequences == 0 for e in run.rollout.episodes)
    first = run.logs[0]
    assert first["harness/pi/tokens_trained_ratio"] == 1.0 and first["rollout/dropped_sequences"] == 0.0
    assert first["rollout/trained_rows"] == float(sum(SEQUENCES_PER_EPISODE))


def test_a_plain_grpo_trainer_falls_back_to_the_longest_sequence_and_counts_the_rest(tiny_model, tmp_path):
    from trl import GRPOTrainer

    plain = _train(tiny_model, tmp_path, GRPOTrainer, "dapo")
    assert len(plain.batch["advantages"]) == 4, "one row per generation, TRL's contract"
    assert sum(e.dropped_sequences for e in plain.rollout.episodes) == sum(SEQUENCES_PER_EPISODE) - 4
    assert plain.logs[0]["rollout/tokens_trained_ratio"] == pytest.approx(4 / sum(SEQUENCES_PER_EPISODE))
