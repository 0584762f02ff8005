"""What a `run_rollout` may ask of a Harbor server: every refusal names the argument and what is offered."""

from __future__ import annotations

import math

import pytest

from openenv.capture.engine import EngineSpec
from openenv.errors import BadRequest
from openenv.harbor_server.admission import RolloutPolicy, check_training_sampling
from openenv.harbor_server.service import RUN_ROLLOUT_ARGS

ENGINE = EngineSpec(backend="vllm", model="/models/tiny", vllm_urls=("http://127.0.0.1:8000",))


def _admit(policy: RolloutPolicy | None = None, **given: object) -> object:
    return (policy or RolloutPolicy(engine=ENGINE)).admit(
        {**RUN_ROLLOUT_ARGS, "harness": "pi", "sandbox": "local", **given}
    )


# TRL's worker sends its temperature with every truncating knob at its no-op value (`training_sampling`).
TRL_SAMPLING = {
    "temperature": 0.7,
    "top_p": 1.0,
    "top_k": -1,
    "min_p": 0.0,
    "frequency_penalty": 0.0,
    "presence_penalty": 0.0,
    "repetition_penalty": 1.0,
}


def test_training_sampling_is_a_temperature_and_an_output_cap() -> None:
    assert check_training_sampling(TRL_SAMPLING).temperature == 0.7  # type: ignore[union-attr]
    assert check_training_sampling({"temperature": 1, "max_tokens": 64}).max_tokens == 64  # type: ignore[union-attr]
    assert check_training_sampling({"top_k": 0}) is not None  # 0 is off too, outside vLLM
    assert check_training_sampling(None) is None


@pytest.mark.parametrize(
    ("sampling", "named"),
    [
        ({"top_p": 0.95}, "top_p=0.95 truncates"),
        ({"top_k": 40}, "top_k=40 truncates"),
        ({"min_p": 0.1}, "min_p=0.1"),
        ({"repetition_penalty": 1.1}, "repetition_penalty=1.1"),
        ({"temperature": 0}, "finite number above 0"),
        ({"temperature": math.inf}, "finite number above 0"),
        ({"temperature": True}, "finite number above 0"),
        ({"max_tokens": 0}, "max_tokens must be"),
        ({"seed": 3}, "seed are not a training policy"),
        ({"stop": ["x"]}, "stop are not"),
        ("hot", "JSON object"),
    ],
)
def test_a_sampling_that_is_not_the_policy_is_refused_by_name(sampling: object, named: str) -> None:
    with pytest.raises(BadRequest, match=named):
        check_training_sampling(sampling)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254/latest",
        "http://127.0.0.1:9999",
        "http://10.0.0.5:8000/v1",
        "file:///etc/passwd",
    ],
)
def test_an_engine_the_operator_did_not_allow_is_refused(url: str) -> None:
    """A client naming any URL would make the server connect there: a request forgery."""
    with pytest.raises(BadRequest, match="not an engine this server may connect to") as caught:
        _admit(llm_url=url)
    assert "http://127.0.0.1:8000" in caught.value.message and "--allow-llm-url" in caught.value.message


def test_the_servers_own_engines_and_the_allow_list_are_taken() -> None:
    assert _admit(llm_url="http://127.0.0.1:8000/v1/").engine == ENGINE  # type: ignore[attr-defined]
    policy = RolloutPolicy(engine=ENGINE, allowed_llm_urls=("http://127.0.0.2:8001",))
    engine = _admit(policy, llm_url="http://127.0.0.2:8001/v1").engine  # type: ignore[attr-defined]
    assert engine.vllm_urls == ("http://127.0.0.2:8001",) and engine.model == ENGINE.model


@pytest.mark.parametrize("sandbox", ["e2b", "modal", "daytona", "", "k8s"])
def test_a_sandbox_not_run_here_is_refused_with_ours(sandbox: str) -> None:
    with pytest.raises(BadRequest, match="this server offers: local, docker"):
        _admit(sandbox=sandbox)


@pytest.mark.parametrize(
    ("given", "named"),
    [
        ({"harness": "terminus"}, "harness 'terminus' is not one this server runs"),
        ({"keep_sandbox": True}, "keep_sandbox"),
        ({"provider": "anthropic"}, "provider 'anthropic'"),
        ({"api_key": "sk-x"}, "api_key"),
        ({"model": "gpt-9"}, "model 'gpt-9'"),
        ({"purpose": "play"}, "purpose 'play'"),
        ({"agent_timeout_sec": -1}, "agent_timeout_sec"),
        ({"agent_step_limit": 2.5}, "agent_step_limit"),
        ({"eval_sampling": {"temperature": 0.2}}, "eval_sampling goes with purpose='eval'"),
    ],
)
def test_other_refusals_name_the_argument(given: dict[str, object], named: str) -> None:
    with pytest.raises(BadRequest, match=named):
        _admit(**given)


def test_oracle_plays_the_solution_through_the_oracle_harness_and_limits_map_to_ours() -> None:
    admitted = _admit(
        RolloutPolicy(engine=ENGINE, oracle_harness="codex"),
        harness="oracle",
        agent_timeout_sec=30,
        agent_step_limit=4,
        sandbox="docker",
    )
    assert (admitted.harness, admitted.policy, admitted.sandbox) == ("codex", "oracle", "docker")  # type: ignore[attr-defined]
    assert admitted.timeout_s == 30 and admitted.budget.max_turns == 4  # type: ignore[attr-defined]
    evaluated = _admit(purpose="eval", eval_sampling={"temperature": 0.2, "top_p": 0.9})
    assert evaluated.purpose == "eval" and evaluated.sampling.top_p == 0.9  # type: ignore[attr-defined]
