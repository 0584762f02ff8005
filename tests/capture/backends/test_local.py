"""`LocalBackend`: in-process transformers; raw logprobs agree between generate and score."""

from __future__ import annotations

from openenv.capture.backends import LocalBackend
from openenv.capture.canonical import Message, SamplingParams, TextPart
from openenv.capture.renderer import Renderer


def prompt(renderer: Renderer) -> list[int]:
    return renderer.full_prompt((Message(role="user", parts=(TextPart(text="hello"),)),), ())[1]


async def test_sampled_logprobs_equal_teacher_forced_scores(
    local_backend: LocalBackend, renderer: Renderer
) -> None:
    ids = prompt(renderer)
    gen = await local_backend.generate(ids, SamplingParams(max_tokens=8, temperature=1.0, seed=3))
    assert len(gen.token_ids) == len(gen.logprobs) and gen.token_ids
    scored = await local_backend.score(ids, gen.token_ids)
    assert max(abs(a - b) for a, b in zip(scored, gen.logprobs)) < 1e-4


async def test_greedy_matches_vllm(local_backend: LocalBackend, renderer: Renderer, vllm_url: str) -> None:
    from openenv.capture.backends import VLLMBackend

    params = SamplingParams(max_tokens=6, temperature=0.0)
    vllm = VLLMBackend(vllm_url)
    try:
        want = await vllm.generate(prompt(renderer), params)
    finally:
        await vllm.aclose()
    got = await local_backend.generate(prompt(renderer), params)
    assert got.token_ids == want.token_ids and got.finish_reason == "length"
    assert max(abs(a - b) for a, b in zip(got.logprobs, want.logprobs)) < 1e-4


def test_context_window_comes_from_the_model_config(local_backend: LocalBackend) -> None:
    assert local_backend.context_window == local_backend.model.config.max_position_embeddings


def test_loading_and_building_the_model_draw_no_progress_bar_and_leave_the_callers_setting(
    tiny_model, capfd, tmp_path
) -> None:
    """`openenv run` printed transformers' `Loading weights` and, on a fresh machine, `Writing model shards`
    bars into its own progress (issue 46)."""
    from transformers.utils import logging as hf_logging

    from openenv.models.tiny import build_tiny_model

    assert hf_logging.is_progress_bar_enabled()
    LocalBackend(tiny_model)
    build_tiny_model(tmp_path / "tiny", force=True)
    printed = capfd.readouterr().err
    assert "Loading weights" not in printed and "Writing model shards" not in printed, printed[-500:]
    assert hf_logging.is_progress_bar_enabled()
