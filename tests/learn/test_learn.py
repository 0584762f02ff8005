"""The recipe's configuration (`openenv.train.learn`): the lean harness specs and which training tasks each
stage sees. The stages themselves run in the smoke (`test_learn_smoke.py`)."""

from __future__ import annotations

from pathlib import Path

import yaml

from openenv.resources import shipped_envs_dir
from openenv.train.learn import (LEAN, LEAN_MINI_FLAGS, LEAN_PI_FLAGS, LearnConfig, grpo_ids, heldout_ids, lean_envs,
                                 oracle_ids, transfer_ids)


def _command(folder: Path, harness: str) -> list[str]:
    return list(yaml.safe_load((folder / harness / "spec.yaml").read_text())["command"])


def test_the_lean_specs_add_only_each_harness_own_flags_where_it_reads_them(tmp_path: Path) -> None:
    envs = lean_envs(tmp_path)
    assert sorted(p.name for p in envs.iterdir()) == sorted(LEAN)
    shipped_pi = _command(shipped_envs_dir(), "pi")
    at = shipped_pi.index("-p") + 1
    assert _command(envs, "pi") == [*shipped_pi[:at], *LEAN_PI_FLAGS, *shipped_pi[at:]]
    # mini-swe-agent reads `-c key=value` overrides after its config file: they go last.
    assert _command(envs, "mini-swe-agent") == [*_command(shipped_envs_dir(), "mini-swe-agent"), *LEAN_MINI_FLAGS]
    assert "agent.instance_template={{task}}" in LEAN_MINI_FLAGS  # the instruction alone, no 1,000-token preamble


def test_each_stage_sees_its_own_training_tasks_and_none_is_held_out(tmp_path: Path) -> None:
    cfg = LearnConfig(out=tmp_path, train_tasks=40, heldout_tasks=8, oracle_episodes=30, eval_tasks=8,
                      transfer_demos=3)
    shown, sampled, second = set(oracle_ids(cfg)), set(grpo_ids(cfg)), set(transfer_ids(cfg))
    held = set(heldout_ids(cfg))
    assert (len(shown), len(sampled), len(second), len(held)) == (30, 10, 3, 8)
    assert not shown & sampled and not (shown | sampled) & held
    # The second harness demonstrates a few of the tasks pi's oracle did: what it adds is the harness.
    assert second <= shown
    assert transfer_ids(cfg) == transfer_ids(cfg)


def test_the_second_harness_grpo_has_its_own_steps_and_rate_and_measures_at_the_end() -> None:
    cfg = LearnConfig(transfer_grpo_steps=7, transfer_grpo_lr=2e-3)
    second = cfg.transfer_grpo()
    assert (second.grpo_steps, second.eval_every, second.grpo_lr) == (7, 7, 2e-3)
    assert (second.num_generations, second.groups_per_step, second.max_tokens) == (cfg.num_generations,
                                                                                  cfg.groups_per_step, cfg.max_tokens)
    assert cfg.transfer_dir == cfg.out / "transfer-mini-swe-agent"
