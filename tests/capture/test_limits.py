"""What one client or one session may cost the proxy: an output budget when none is asked, a turn
timeout, a turn cap, count_tokens calls that store nothing, and sessions that expire when idle."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import openai
import pytest

from openenv.capture.backends.local import LocalBackend
from openenv.capture.renderer import Renderer
from openenv.capture.server import CaptureServer
from openenv.capture.session import TurnLimits

HI = [{"role": "user", "content": "hi"}]


def _server(renderer: Renderer, backend: LocalBackend, **options: object) -> CaptureServer:
    return CaptureServer(backend=backend, renderer=renderer, **options)  # type: ignore[arg-type]


def test_a_request_without_max_tokens_gets_the_default_budget_and_it_is_recorded(
    renderer: Renderer, local_backend: LocalBackend
) -> None:
    with _server(renderer, local_backend, limits=TurnLimits(max_new_tokens_default=3)) as proxy:
        session = proxy.open_session(mode="auto")
        client = openai.OpenAI(base_url=session.base_url + "/v1", api_key="x", max_retries=0, timeout=120)
        reply = client.chat.completions.create(model="tiny", messages=HI, temperature=1.0, seed=0)  # type: ignore[arg-type]
        asked = client.chat.completions.create(model="tiny", messages=HI, max_tokens=5, temperature=1.0)  # type: ignore[arg-type]
        turns = session.turns()
    assert reply.usage is not None and reply.usage.completion_tokens <= 3
    assert [t.max_tokens for t in turns] == [3, 5]  # the default, then what the harness asked for
    assert asked.usage is not None and asked.usage.completion_tokens <= 5


def test_count_tokens_calls_store_no_turns(renderer: Renderer, local_backend: LocalBackend) -> None:
    with _server(renderer, local_backend) as proxy:
        session = proxy.open_session(mode="auto")
        with httpx.Client(timeout=30) as http:
            for _ in range(2000):
                reply = http.post(
                    f"{session.base_url}/v1/messages/count_tokens", json={"model": "tiny", "messages": HI}
                )
                assert reply.status_code == 200
        assert session.turns() == [] and session.count_tokens_calls == 2000


def test_a_session_past_its_turn_cap_gets_a_non_retryable_error(
    renderer: Renderer, local_backend: LocalBackend
) -> None:
    with _server(renderer, local_backend, limits=TurnLimits(max_turns=2)) as proxy:
        session = proxy.open_session(mode="auto")
        client = openai.OpenAI(base_url=session.base_url + "/v1", api_key="x", max_retries=0, timeout=120)
        for _ in range(2):
            client.chat.completions.create(model="tiny", messages=HI, max_tokens=2)  # type: ignore[arg-type]
        with pytest.raises(openai.BadRequestError) as caught:
            client.chat.completions.create(model="tiny", messages=HI, max_tokens=2)  # type: ignore[arg-type]
        assert caught.value.code == "turn_cap" and len(session.turns()) == 2


def test_a_turn_past_its_wall_clock_limit_is_a_gap_and_a_retryable_error(
    renderer: Renderer, local_backend: LocalBackend
) -> None:
    with _server(renderer, local_backend, limits=TurnLimits(turn_timeout_s=0.5)) as proxy:
        session = proxy.open_session(mode="auto")
        client = openai.OpenAI(base_url=session.base_url + "/v1", api_key="x", max_retries=0, timeout=120)
        t0 = time.monotonic()
        with pytest.raises(openai.InternalServerError) as caught:  # 503: the SDKs retry it
            client.chat.completions.create(
                model="tiny", messages=HI, max_tokens=4000, temperature=1.0, seed=0
            )  # type: ignore[arg-type]
        assert caught.value.status_code == 503 and time.monotonic() - t0 < 30
        [turn] = session.turns()
    assert turn.gap is not None and "turn timeout" in turn.gap


def test_thousands_of_sessions_later_the_proxy_still_opens_them(
    renderer: Renderer, local_backend: LocalBackend, tmp_path: Path
) -> None:
    """Sessions that are never closed expire when idle; when all slots are busy the error says so."""
    with _server(renderer, local_backend, idle_timeout_s=0.5, journal_dir=tmp_path, admin_key="k") as proxy:
        proxy.registry.max_sessions = 50
        opened, refused = 0, []
        with httpx.Client(timeout=30, headers={"Authorization": "Bearer k"}) as http:
            while opened < 2000:
                reply = http.post(f"{proxy.base_url}/sessions", json={})
                if reply.status_code == 503:
                    refused.append(reply.json()["error"]["message"])
                    time.sleep(0.1)
                    continue
                assert reply.status_code == 201, reply.text
                opened += 1
            listing = http.get(f"{proxy.base_url}/sessions").json()
    assert refused and "at capacity: 50 of 50" in refused[0]
    assert len(listing["sessions"]) <= 50 and listing["reaped"] >= 2000 - 50
    assert len(list(tmp_path.glob("*.jsonl"))) == 2000  # every session's journal, closed as idle
