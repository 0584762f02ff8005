"""`sample` and `run` modes against the real vLLM CPU server: an untrained tiny model rarely solves the
task (reward 0 is fine), but the episode must end cleanly with every sampled token scored."""

from __future__ import annotations

import pytest

from openenv.harness.environment import HarnessEnvironment
from openenv.harness.rollout import run_episode
from openenv.harness.tasks import builtin_task

pytestmark = [pytest.mark.slow, pytest.mark.vllm]


@pytest.mark.parametrize("policy", ["sample", "run"])
def test_pi_episode_sampled_by_vllm_ends_cleanly(vllm_url, tiny_model, policy, require_harness,
                                                 no_leftover_processes):
    require_harness("pi")
    env = HarnessEnvironment("pi", backend="vllm", vllm_url=vllm_url, model=tiny_model)
    try:
        obs, summary = run_episode(env, builtin_task("implement-slugify"), policy=policy, timeout_s=240)
        records = env.trajectory()
    finally:
        env.close()
    assert obs.done and summary.status in ("exited", "failed"), obs.output_tail
    assert summary.reward in (0.0, 1.0) and summary.turns >= 1
    sampled = [r for r in records if not r.aux and r.completion is not None]
    assert sampled and all(r.source == "sample" for r in sampled)
    assert all(len(r.completion.logprobs) == len(r.completion.token_ids) > 0 for r in sampled)
    assert summary.sequences >= 1 and obs.sequences
    assert all(len(row.logprobs) == len(row.completion_ids) for row in obs.sequences)
