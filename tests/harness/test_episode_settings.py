"""Episode settings are one value: every road's config embeds `EpisodeSettings`, takes its settings flat
as a shorthand, and hands the one value to `HarnessEnvironment(settings=...)`."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from openenv.capture.canonical import SamplingParams
from openenv.capture.engine import EngineSpec
from openenv.errors import BadRequest
from openenv.eval.episodes import EpisodeRequest
from openenv.eval.runner import EvalPlan
from openenv.harness.environment import HarnessEnvironment
from openenv.harness.episode_settings import DEFAULT_SAMPLING, EpisodeSettings, fold_words
from openenv.train.rollout import RolloutConfig


@pytest.fixture(autouse=True)
def no_engine_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENENV_BACKEND", "OPENENV_MODEL", "OPENENV_VLLM_URL"):
        monkeypatch.delenv(name, raising=False)


def test_flat_settings_fold_into_the_one_value_on_every_road() -> None:
    """The same words give the same `EpisodeSettings` whichever config they are given to."""
    expected = EpisodeSettings(
        sandbox="docker", timeout_s=60, sampling=SamplingParams(max_tokens=32, temperature=1.0)
    )
    assert RolloutConfig(sandbox="docker", episode_timeout_s=60, max_tokens=32).episode == expected
    assert (
        EvalPlan(harnesses=["pi"], tasks=["t"], sandbox="docker", timeout_s=60, max_tokens=32).episode
        == expected
    )
    assert (
        EpisodeRequest(harness="pi", task="t", sandbox="docker", timeout_s=60, max_tokens=32).settings
        == expected
    )


def test_a_word_given_as_none_is_not_given() -> None:
    """The CLI passes every option, unset ones as None: they keep the defaults."""
    words = {"harnesses": ["pi"], "tasks": ["t"], "max_tokens": None, "timeout_s": None}
    plan = EvalPlan.model_validate(
        fold_words({**words, "model": None, "vllm_url": None}, settings="episode", engine="engine")
    )
    assert plan.episode == EpisodeSettings() and plan.episode.sampling == DEFAULT_SAMPLING
    assert plan.engine == EngineSpec(backend="local") == EvalPlan.model_validate(words).engine


def test_the_plan_hands_its_engine_and_settings_to_every_request() -> None:
    plan = EvalPlan(
        harnesses=["pi", "codex"],
        tasks=["t"],
        repeats=2,
        engine=EngineSpec.of("vllm", vllm_url="http://e:1/"),
        sandbox="docker",
    )
    requests = plan.requests()
    assert len(requests) == 4
    assert [(r.engine, r.settings) for r in requests] == [
        (EngineSpec("vllm", None, ("http://e:1",)), plan.episode)
    ] * 4


def test_an_engine_given_both_ways_is_refused_by_name() -> None:
    words = {"harness": "pi", "task": "t", "engine": EngineSpec("local"), "backend": "vllm"}
    with pytest.raises(ValueError, match=r"pass engine= or backend=/model=/vllm_url=, not both"):
        fold_words(words, engine="engine")


def test_below_the_edge_an_engine_is_one_value_and_engine_words_are_unknown_fields() -> None:
    """Only the CLI and MCP edge take the engine in words (through `fold_words`); a config below takes
    an `EngineSpec`."""
    with pytest.raises(ValidationError, match="backend"):
        EpisodeRequest.model_validate({"harness": "pi", "task": "t", "backend": "vllm"})
    with pytest.raises(ValidationError, match="vllm_url"):
        RolloutConfig.model_validate({"vllm_url": "http://e:1"})
    words = {"harness": "pi", "task": "t", "backend": "vllm", "vllm_url": "http://e:1,http://e:2/"}
    request = EpisodeRequest.model_validate(fold_words(words, engine="engine"))
    assert request.engine == EngineSpec("vllm", None, ("http://e:1", "http://e:2"))


def test_settings_are_validated_where_they_are_declared() -> None:
    with pytest.raises(ValidationError, match="sandbox must be 'local' or 'docker', got 'vm'"):
        EpisodeSettings(sandbox="vm")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="max_tokens must be above 0"):
        RolloutConfig(max_tokens=0)
    with pytest.raises(ValidationError, match="temperature above 0"):
        RolloutConfig(temperature=0.0)  # a training run samples; an eval may be greedy
    assert EvalPlan(harnesses=["pi"], tasks=["t"], temperature=0.0).episode.sampling.temperature == 0.0  # type: ignore[union-attr]


def test_the_env_runs_on_the_settings_it_is_given_and_takes_no_loose_words() -> None:
    settings = EpisodeSettings(sandbox="docker", turn_timeout_s=5, sampling=None)
    env = HarnessEnvironment("pi", settings=settings)
    assert env.settings == settings and HarnessEnvironment("pi").settings == EpisodeSettings()
    with pytest.raises(TypeError, match="sandbox"):
        HarnessEnvironment("pi", sandbox="docker")  # type: ignore[call-arg]


def test_a_none_setting_means_the_environment_read_when_the_episode_needs_it(monkeypatch) -> None:
    settings = EpisodeSettings()
    monkeypatch.setenv("OPENENV_SANDBOX_ISOLATION", "container")
    monkeypatch.setenv("OPENENV_LOCAL_WITHOUT_BUILD", "yes")
    assert settings.isolation_in_effect() == "container" and settings.local_without_build_in_effect()
    explicit = EpisodeSettings(isolation="bwrap", local_without_build=False)
    assert explicit.isolation_in_effect() == "bwrap" and not explicit.local_without_build_in_effect()
    monkeypatch.setenv("OPENENV_SANDBOX_ISOLATION", "chroot")
    with pytest.raises(BadRequest, match="OPENENV_SANDBOX_ISOLATION='chroot'"):
        settings.isolation_in_effect()
    assert settings.network_in_effect() == "loopback"
