"""TRL's own per-token log-probability code agrees with the logprobs our rows carry, at a temperature other
than 1, and `HarnessRollout` refuses to train at another temperature than the one it samples at.

The function is the one `GRPOTrainer` computes its old/ref/current logprobs with
(`_get_per_token_logps_and_entropies`, through the fused LM head TRL fits with `GRPOConfig.temperature`),
called on rows recorded by the capture proxy over each backend at T=0.7.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import openai
import pytest
import torch

from openenv.capture.canonical import SamplingParams
from openenv.capture.server import CaptureServer
from openenv.errors import BadRequest
from openenv.train.rollout import HarnessRollout, RolloutConfig

TEMPERATURE = 0.7


@pytest.fixture(scope="module")
def grpo(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A real `GRPOTrainer` on the tiny model at temperature 0.7, float32 (no bf16 autocast), never trained."""
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    args = GRPOConfig(
        output_dir=str(tmp_path_factory.mktemp("grpo")),
        use_cpu=True,
        bf16=False,
        temperature=TEMPERATURE,
        per_device_train_batch_size=2,
        num_generations=2,
        max_steps=1,
        report_to="none",
        save_strategy="no",
        seed=0,
    )
    return GRPOTrainer(
        model=str(tiny_model),
        processing_class=AutoTokenizer.from_pretrained(tiny_model),
        args=args,
        train_dataset=Dataset.from_dict({"prompt": ["fix-binary-search"] * 2}),
        reward_funcs=[lambda completions, **_: [0.0] * len(completions)],
    )


@pytest.fixture(params=["vllm", "local"])
def any_proxy(request: pytest.FixtureRequest, renderer: Any) -> Any:
    """A capture proxy over the suite's vLLM server or the in-process local backend."""
    from openenv.capture.backends.vllm import VLLMBackend

    backend = (
        VLLMBackend(request.getfixturevalue("vllm_url"))
        if request.param == "vllm"
        else request.getfixturevalue("local_backend")
    )
    with CaptureServer(backend=backend, renderer=renderer) as server:
        yield server


def _trl_logprobs(trainer: Any, prompt: list[int], completion: list[int]) -> list[float]:
    full = torch.tensor([prompt + completion])
    with torch.no_grad():
        logps = trainer._get_per_token_logps_and_entropies(
            trainer.model, full, torch.ones_like(full), len(completion)
        )[0]
    return logps[0].tolist()  # type: ignore[no-any-return]


@pytest.mark.vllm
def test_trls_per_token_logprobs_equal_our_rows_at_temperature_0_7(
    any_proxy: CaptureServer, grpo: Any
) -> None:
    session = any_proxy.open_session(
        mode="auto", sampling=SamplingParams(max_tokens=24, temperature=TEMPERATURE)
    )
    client = openai.OpenAI(base_url=session.base_url + "/v1", api_key=session.token, max_retries=0)
    messages: list[Any] = [{"role": "user", "content": "Fix the bug."}]
    for k in range(2):
        text = (
            client.chat.completions.create(model="tiny", messages=messages).choices[0].message.content or ""
        )
        messages += [{"role": "assistant", "content": text}, {"role": "user", "content": f"Again {k}."}]
    (row,) = session.sequences()
    assert (row.temperature, row.logprob_mode, row.trainable) == (TEMPERATURE, "processed", True)
    theirs = _trl_logprobs(grpo, row.prompt_ids, row.completion_ids)
    errors = [abs(a - b) for a, b, m in zip(row.logprobs, theirs, row.env_mask, strict=True) if m == 1]
    assert len(errors) > 2 and max(errors) < 1e-4
    raw = [
        abs(a - b)
        for a, b, m in zip(row.logprobs, _trl_logprobs_at_one(grpo, row), row.env_mask, strict=True)
        if m == 1
    ]
    assert max(raw) > 1e-2  # the comparison can fail: at T=1 TRL would disagree


def _trl_logprobs_at_one(trainer: Any, row: Any) -> list[float]:
    from trl.trainer.utils import selective_log_softmax

    ids = torch.tensor([row.prompt_ids + row.completion_ids])
    with torch.no_grad():
        logits = trainer.model(ids, fused_lm_head=False).logits[0, len(row.prompt_ids) - 1 : -1]
    return selective_log_softmax(logits.unsqueeze(0), torch.tensor([row.completion_ids]))[0].tolist()  # type: ignore[no-any-return]


def test_harness_rollout_refuses_a_temperature_unlike_grpo_configs(grpo: Any) -> None:
    rollout = HarnessRollout(RolloutConfig(temperature=0.5, max_tokens=8))
    with pytest.raises(BadRequest) as info:
        rollout.plan(["fix-binary-search"] * 2, grpo)
    assert "temperature 0.5" in info.value.message and "GRPOConfig.temperature is 0.7" in info.value.message
    assert info.value.details["param"] == "temperature"
    HarnessRollout(RolloutConfig(temperature=TEMPERATURE, max_tokens=8)).check_trainer(
        grpo
    )  # equal: accepted


def test_training_rows_carry_the_temperature_and_the_engines_verdict() -> None:
    from openenv.capture.trajectory import SequenceRow
    from openenv.testing.results import episode_result
    from openenv.train.rollout import training_row

    row = SequenceRow(
        prompt_ids=[1],
        completion_ids=[2, 3],
        logprobs=[-0.1, -0.2],
        env_mask=[1, 1],
        turn_ids=["t"],
        temperature=0.7,
        logprob_mode="processed",
        trainable=True,
    )
    out = training_row(
        episode_result([row], sequences="all", reward=1.0, breakdown={}, turns=1), masked=False, filler=0
    )
    assert (out["temperature"], out["logprob_mode"], out["logprobs_trainable"]) == (0.7, "processed", True)
    old = row.model_copy(update={"temperature": None, "logprob_mode": "unknown", "trainable": False})
    out = training_row(
        episode_result([old], sequences="all", reward=1.0, breakdown={}, turns=1), masked=False, filler=0
    )
    assert (out["temperature"], out["logprob_mode"], out["logprobs_trainable"]) == (None, "unknown", False)


def test_a_trainer_without_a_temperature_is_not_refused() -> None:
    HarnessRollout(RolloutConfig(temperature=0.5, max_tokens=8)).check_trainer(
        SimpleNamespace(args=SimpleNamespace())
    )
