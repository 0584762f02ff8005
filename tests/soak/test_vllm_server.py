"""The vLLM server's launch: what it asks vLLM for is what vLLM gets."""

from __future__ import annotations

import pytest

from openenv.soak.vllm_server import VLLMServer


def test_the_kv_cache_size_asked_for_is_not_replaced_by_the_legacy_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # vLLM's CPU platform replaces --kv-cache-memory-bytes with VLLM_CPU_KVCACHE_SPACE (whole GiB) when
    # that is set: the server must not set it, nor pass on one inherited from its caller.
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "4")
    server = VLLMServer("model", port=1, kv_cache_bytes=300 * 1024 * 1024)

    assert "VLLM_CPU_KVCACHE_SPACE" not in server.environment()
    command = server.command()
    assert command[command.index("--kv-cache-memory-bytes") + 1] == str(300 * 1024 * 1024)


def test_the_default_kv_cache_is_the_gib_every_server_has_run_with() -> None:
    server = VLLMServer("model", port=1)

    command = server.command()
    assert command[command.index("--kv-cache-memory-bytes") + 1] == str(1 << 30)
    assert server.environment()["VLLM_TARGET_DEVICE"] == "cpu"
