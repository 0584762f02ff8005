"""The capture server a training run samples through refuses settings that would make it sample wrong."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from trl import GRPOConfig

from openenv.capture.engine import CapturePool, EngineSpec
from openenv.errors import BadRequest
from openenv.train.policy_server import policy_server


def _trainer(**config: object) -> SimpleNamespace:
    """Only what `policy_server` reads before it refuses: the run's real `GRPOConfig`."""
    return SimpleNamespace(
        args=GRPOConfig(output_dir="/tmp/openenv-unused", use_cpu=True, report_to="none", **config)
    )


def test_the_local_backend_refuses_trls_default_gradient_checkpointing_and_says_what_to_pass() -> None:
    with pytest.raises(BadRequest, match=r"GRPOConfig\(gradient_checkpointing=False\)"):
        policy_server(_trainer(), EngineSpec("local"), CapturePool())


def test_the_vllm_backend_without_a_url_says_where_to_give_one(tmp_path: object) -> None:
    with pytest.raises(BadRequest, match=r"vllm_url=URL\) or GRPOConfig\(vllm_server_base_url"):
        policy_server(
            _trainer(gradient_checkpointing=False), EngineSpec("vllm", model=str(tmp_path)), CapturePool()
        )
