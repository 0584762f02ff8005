"""An engine is one value: `EngineSpec.of` reads words, paths, URL lists and the environment one way, and
every road gets its capture server from the spec."""

from __future__ import annotations

from pathlib import Path

import pytest

from openenv.capture.backends.vllm import VLLMBackend
from openenv.capture.backends.vllm_engines import VLLMEngines, split_urls
from openenv.capture.engine import EngineSpec, shared_capture_server
from openenv.errors import BadRequest


@pytest.fixture(autouse=True)
def no_engine_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENENV_BACKEND", "OPENENV_MODEL", "OPENENV_VLLM_URL"):
        monkeypatch.delenv(name, raising=False)


def test_url_lists_are_parsed_one_way_whatever_their_form() -> None:
    expected = ("http://a:1", "http://b:2")
    assert split_urls("http://a:1/, http://b:2") == expected
    assert split_urls([" http://a:1/", "http://b:2", " "]) == expected
    assert split_urls(None) == split_urls("") == split_urls(" , ") == ()


def test_words_become_a_spec_and_what_is_missing_comes_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert EngineSpec.of() == EngineSpec(backend="local")
    assert EngineSpec.of("vllm", model=Path("/m"), vllm_url="http://a/,http://b") == EngineSpec(
        "vllm", "/m", ("http://a", "http://b")
    )
    monkeypatch.setenv("OPENENV_BACKEND", "vllm")
    monkeypatch.setenv("OPENENV_MODEL", "/env-model")
    monkeypatch.setenv("OPENENV_VLLM_URL", "http://env:8000/")
    assert EngineSpec.of() == EngineSpec("vllm", "/env-model", ("http://env:8000",))
    assert EngineSpec.of("local") == EngineSpec("local", "/env-model")  # a local engine has no URLs
    assert EngineSpec.of("vllm", vllm_url="http://given").vllm_urls == (
        "http://given",
    )  # given beats the environment


def test_an_unknown_backend_is_named_with_where_it_came_from(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(BadRequest, match=r"backend='gpu': expected one of local, vllm"):
        EngineSpec.of("gpu")
    monkeypatch.setenv("OPENENV_BACKEND", "tpu")
    with pytest.raises(BadRequest, match=r"OPENENV_BACKEND='tpu'"):
        EngineSpec.of()


def test_vllm_without_a_url_is_refused_when_it_must_start_not_when_it_is_described() -> None:
    spec = EngineSpec.of("vllm")  # a served env is built before anyone configured it
    with pytest.raises(BadRequest, match="OPENENV_VLLM_URL"):
        spec.make_backend()
    with pytest.raises(BadRequest, match="OPENENV_VLLM_URL"):
        shared_capture_server(spec)


def test_one_url_makes_a_vllm_backend_and_several_make_engines(tiny_model: Path) -> None:
    one = EngineSpec("vllm", str(tiny_model), ("http://127.0.0.1:9",)).make_backend()
    two = EngineSpec("vllm", str(tiny_model), ("http://127.0.0.1:9", "http://127.0.0.1:10")).make_backend()
    assert isinstance(one, VLLMBackend) and isinstance(two, VLLMEngines)


def test_specs_for_the_same_engine_share_one_server(tiny_model: Path) -> None:
    """The tiny model named or defaulted is the same folder, so the same server (one model load)."""
    named = shared_capture_server(EngineSpec("vllm", str(tiny_model), ("http://127.0.0.1:9",)))
    assert (
        shared_capture_server(EngineSpec.of("vllm", model=tiny_model, vllm_url="http://127.0.0.1:9/"))
        is named
    )
    assert shared_capture_server(EngineSpec("vllm", str(tiny_model), ("http://127.0.0.1:10",))) is not named
