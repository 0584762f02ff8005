"""Which engines may train, how the probe tells, and what a training policy may set.

A raw-logprob engine (vLLM's default `raw_logprobs`) returns `log_softmax(logits)` whatever the temperature;
a training session at T != 1 on it would record the wrong distribution's logprobs, so it is refused before
any turn; an evaluation session runs and its rows say `raw`, not trainable. A training policy samples the
full vocabulary: `top_p`, `top_k`, `min_p` and the like are refused naming the field.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import openai
import pytest

from openenv.capture.backends.local import LocalBackend
from openenv.capture.backends.vllm import VLLMBackend
from openenv.capture.canonical import SamplingParams
from openenv.capture.journal import rebuild_rows
from openenv.capture.logprob_mode import UntrainableEngine, exact_for_training, verdict_from_gaps
from openenv.capture.renderer import Renderer
from openenv.capture.sampling_policy import training_sampling
from openenv.capture.server import CaptureServer
from openenv.errors import BadRequest
from openenv.harness.episode_settings import EpisodeSettings

MESSAGES = [{"role": "user", "content": "Say hello."}]


def _ask(session: object) -> None:
    client = openai.OpenAI(base_url=session.base_url + "/v1", api_key=session.token, max_retries=0)  # type: ignore[attr-defined]
    client.chat.completions.create(model="tiny", messages=MESSAGES)


# ---- the probe ----------------------------------------------------------------------------------------


def test_the_probe_rule_halved_gap_is_processed_same_gap_is_raw_a_tie_decides_nothing() -> None:
    assert verdict_from_gaps(2.0, 1.0) == "processed"
    assert verdict_from_gaps(2.0, 2.0) == "raw"
    assert verdict_from_gaps(0.0, 0.0) == "unknown"
    assert verdict_from_gaps(2.0, 1.5) == "unknown"


@pytest.mark.vllm
def test_the_probe_tells_the_suites_processed_vllm_from_a_raw_one(vllm_url: str, raw_vllm_url: str) -> None:
    async def verdicts() -> tuple[str, str]:
        return await VLLMBackend(vllm_url).logprob_mode(), await VLLMBackend(raw_vllm_url).logprob_mode()

    assert asyncio.run(verdicts()) == ("processed", "raw")


def test_the_local_backend_is_processed(local_backend: LocalBackend) -> None:
    assert asyncio.run(local_backend.logprob_mode()) == "processed"


@pytest.mark.vllm
def test_a_probe_is_made_once_per_engine(vllm_url: str) -> None:
    probes: list[dict] = []
    backend = VLLMBackend(vllm_url)
    backend._post = _counting(backend._post, probes)  # type: ignore[method-assign]

    async def twice() -> None:
        await asyncio.gather(backend.logprob_mode(), backend.logprob_mode())
        await backend.logprob_mode()

    asyncio.run(twice())
    assert [p["temperature"] for p in probes] == [1.0, 2.0]


def _counting(post, seen):  # type: ignore[no-untyped-def]
    async def counted(body, **kw):  # type: ignore[no-untyped-def]
        seen.append(body)
        return await post(body, **kw)

    return counted


# ---- a raw engine: refused for training at T != 1, marked in evaluation --------------------------------


@pytest.mark.vllm
def test_a_raw_vllm_is_refused_for_a_training_session_at_temperature_half(
    raw_vllm_url: str, renderer: Renderer
) -> None:
    with CaptureServer(backend=VLLMBackend(raw_vllm_url), renderer=renderer) as server:
        with pytest.raises(UntrainableEngine) as info:
            server.open_session(mode="auto", sampling=SamplingParams(max_tokens=8, temperature=0.5))
        message = info.value.message
        assert "\n" not in message and "raw logprobs" in message
        assert "--logprobs-mode processed_logprobs" in message
        assert server.registry.sessions == {}  # nothing left open


@pytest.mark.vllm
def test_a_raw_vllm_trains_at_temperature_one_where_raw_is_the_sampling_distribution(
    raw_vllm_url: str, renderer: Renderer
) -> None:
    with CaptureServer(backend=VLLMBackend(raw_vllm_url), renderer=renderer) as server:
        session = server.open_session(mode="auto", sampling=SamplingParams(max_tokens=8, temperature=1.0))
        _ask(session)
        row = session.sequences()[0]
        assert (row.temperature, row.logprob_mode, row.trainable) == (1.0, "raw", True)


@pytest.mark.vllm
def test_an_evaluation_session_on_a_raw_vllm_runs_and_its_rows_are_not_trainable(
    raw_vllm_url: str, renderer: Renderer
) -> None:
    with CaptureServer(backend=VLLMBackend(raw_vllm_url), renderer=renderer) as server:
        session = server.open_session(
            mode="auto", sampling=SamplingParams(max_tokens=8, temperature=0.5), sampling_policy="request"
        )
        _ask(session)
        (row,), (turn,) = session.sequences(), session.turns()
        assert (row.temperature, row.logprob_mode, row.trainable) == (0.5, "raw", False)
        assert (turn.temperature, turn.logprob_mode, turn.trainable) == (0.5, "raw", False)


@pytest.mark.vllm
def test_the_admin_api_refuses_a_training_session_on_a_raw_vllm_in_json(
    raw_vllm_url: str, renderer: Renderer
) -> None:
    with CaptureServer(backend=VLLMBackend(raw_vllm_url), renderer=renderer) as server:
        sampling = {"max_tokens": 8, "temperature": 0.5}
        refused = httpx.post(server.base_url + "/sessions", json={"sampling": sampling}, timeout=60)
        assert refused.status_code == 400 and "processed_logprobs" in refused.text
        evaluation = httpx.post(
            server.base_url + "/sessions", json={"sampling": sampling, "policy": "request"}, timeout=60
        )
        assert evaluation.status_code == 201


# ---- a training policy is full-vocabulary ------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value"),
    [("top_p", 0.9), ("top_k", 20), ("min_p", 0.05), ("repetition_penalty", 1.1), ("presence_penalty", 0.5)],
)
def test_a_training_policy_refuses_a_truncating_field_naming_it(field: str, value: float) -> None:
    with pytest.raises(BadRequest) as info:
        training_sampling(SamplingParams(temperature=0.7, **{field: value}))
    assert info.value.details["param"] == field and f"{field}=" in info.value.message
    assert "log_softmax(logits / temperature)" in info.value.message


def test_values_that_change_nothing_are_not_refused() -> None:
    neutral = SamplingParams(
        temperature=0.7, max_tokens=64, top_p=1.0, top_k=-1, min_p=0.0, seed=3, stop=("x",)
    )
    assert training_sampling(neutral) is neutral


def test_top_p_in_a_training_policy_is_refused_at_configuration_time_everywhere(
    renderer: Renderer, local_backend: LocalBackend
) -> None:
    nucleus = SamplingParams(max_tokens=8, temperature=0.7, top_p=0.9)
    with pytest.raises(ValueError, match="top_p=0.9"):
        EpisodeSettings(sampling=nucleus)
    assert (
        EpisodeSettings(sampling=nucleus, sampling_policy="request").sampling == nucleus
    )  # evaluation keeps it
    with CaptureServer(backend=local_backend, renderer=renderer) as server:
        with pytest.raises(BadRequest, match="top_p"):
            server.open_session(mode="auto", sampling=nucleus)
        assert (
            server.open_session(mode="auto", sampling=nucleus, sampling_policy="request").session.sampling
            == nucleus
        )


def test_the_rollout_config_refuses_top_p() -> None:
    from openenv.train.rollout import RolloutConfig

    with pytest.raises(ValueError, match="top_p"):
        RolloutConfig(episode={"sampling": {"max_tokens": 8, "temperature": 0.7, "top_p": 0.9}})


def test_a_training_run_cannot_opt_out_of_the_trainers_sampling_policy() -> None:
    from openenv.train.rollout import RolloutConfig

    with pytest.raises(ValueError, match="sampling_policy='request'"):
        RolloutConfig(sampling_policy="request")


def test_exactness_rule() -> None:
    assert exact_for_training("processed", SamplingParams(temperature=0.5))
    assert not exact_for_training("raw", SamplingParams(temperature=0.5))
    assert exact_for_training("raw", SamplingParams(temperature=1.0))
    assert not exact_for_training("processed", SamplingParams(temperature=0.5, top_p=0.9))
    assert not exact_for_training("processed", SamplingParams(temperature=0.0))  # greedy has no distribution
    assert not exact_for_training("unknown", SamplingParams(temperature=1.0))


# ---- journals ---------------------------------------------------------------------------------------------


def test_a_journal_carries_the_logprob_meaning_and_rebuilds_it(
    local_backend: LocalBackend, renderer: Renderer, tmp_path: Path
) -> None:
    with CaptureServer(backend=local_backend, renderer=renderer, journal_dir=tmp_path) as server:
        session = server.open_session(mode="auto", sampling=SamplingParams(max_tokens=6, temperature=0.5))
        _ask(session)
        live = session.sequences()
    (rebuilt,), _, _ = rebuild_rows(next(tmp_path.glob("*.jsonl")))
    assert rebuilt == live[0]
    assert (rebuilt.temperature, rebuilt.logprob_mode, rebuilt.trainable) == (0.5, "processed", True)


def test_a_journal_from_before_this_change_rebuilds_with_logprobs_of_unknown_mode(tmp_path: Path) -> None:
    """A line as main `a759e1b` wrote it: no temperature, no mode. Its logprobs are never passed off as the
    sampling distribution's."""
    old = tmp_path / "old.jsonl"
    lines = [
        {
            "t": "session",
            "version": 1,
            "id": "20261204T000000-abc",
            "opened": 0.0,
            "mode": "auto",
            "served_model": "tiny",
        },
        {
            "t": "turn",
            "id": "t1",
            "index": 0,
            "dialect": "openai_chat",
            "aux": False,
            "source": "sample",
            "gap": None,
            "seq": 0,
            "parent": None,
            "kind": "new",
            "prompt_len": 3,
            "max_tokens": 4,
            "prompt_ids": [1, 2, 3],
            "completion_ids": [4, 5],
            "logprobs": [-0.5, -1.25],
            "finish": "length",
        },
        {"t": "closed", "reason": "closed", "at": 1.0},
    ]
    old.write_text("".join(json.dumps(line) + "\n" for line in lines))
    (row,), stats, _ = rebuild_rows(old)
    assert (row.completion_ids, row.logprobs) == ([4, 5], [-0.5, -1.25])
    assert (row.temperature, row.logprob_mode, row.trainable) == (None, "unknown", False)
    assert stats.turns == 1
