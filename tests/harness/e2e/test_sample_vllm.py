"""`sample` and `run` modes against the real vLLM CPU server: an untrained tiny model rarely solves the
task (reward 0 is fine), but the episode must end cleanly with every sampled token scored."""

from __future__ import annotations

import pytest

from openenv.capture.engine import EngineSpec
from openenv.harness.environment import EpisodeSettings, HarnessEnvironment
from openenv.harness.rollout import run_episode
from openenv.harness.tasks import builtin_task

pytestmark = [pytest.mark.slow, pytest.mark.vllm]


@pytest.mark.parametrize("policy", ["sample", "run"])
def test_pi_episode_sampled_by_vllm_ends_cleanly(
    vllm_url, tiny_model, policy, require_harness, no_leftover_processes
):
    require_harness("pi")
    env = HarnessEnvironment("pi", engine=EngineSpec.of("vllm", model=tiny_model, vllm_url=vllm_url))
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


@pytest.mark.parametrize("backend", ["vllm", "local"])
def test_a_real_episode_at_temperature_half_records_the_sampling_distributions_logprobs(
    vllm_url, tiny_model, teacher, backend, require_harness, no_leftover_processes
):
    """Every sampled token of a real pi episode at T=0.5 carries log_softmax(logits / 0.5), as the trainer
    recomputes it, and the episode's summary (`openenv run --json`) and rows say so (issue 44)."""
    from openenv.capture.canonical import SamplingParams
    from openenv.testing.teacher import teacher_logprobs

    require_harness("pi")
    engine = EngineSpec.of(backend, model=tiny_model, vllm_url=vllm_url if backend == "vllm" else None)
    settings = EpisodeSettings(sampling=SamplingParams(max_tokens=32, temperature=0.5))
    env = HarnessEnvironment("pi", engine=engine, settings=settings)
    try:
        obs, summary = run_episode(env, builtin_task("implement-slugify"), policy="run", timeout_s=240)
    finally:
        env.close()
    assert obs.done and obs.sequences, obs.output_tail
    for row in obs.sequences:
        expected = teacher_logprobs(teacher, row.prompt_ids, row.completion_ids, 0.5)
        errors = [abs(a - b) for a, b, m in zip(row.logprobs, expected, row.env_mask, strict=True) if m == 1]
        assert errors and max(errors) < 1e-4
        assert (row.temperature, row.logprob_mode, row.trainable) == (0.5, "processed", True)
    shown = summary.model_dump(mode="json")
    assert (shown["temperature"], shown["logprob_mode"], shown["trainable"]) == (0.5, "processed", True)
