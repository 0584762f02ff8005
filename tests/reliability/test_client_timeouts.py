"""A client that gives up on a turn before the backend answers it, then sends the same request again.

The turn must be recorded once, from one backend call, and the retry must read the reply that was
recorded: while the first attempt is still being answered (the retry joins it), or after it was recorded
(a numbered retry is replayed). A `FaultProxy` in `hold` mode keeps vLLM's answer back until the test
releases it, and the client gives up by closing its connection (what its timeout does) only once the
backend call is provably waiting there. No step waits on a clock: each waits for the event before it, so
the order is the same on an idle laptop and on a machine at load 17.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import httpx2
import openai
import pytest
import xxhash

import openenv.capture.routes.model as model_routes
from openenv.capture.backends import VLLMBackend
from openenv.capture.canonical import SamplingParams
from openenv.capture.gate import call_on_loop
from openenv.capture.renderer import Renderer
from openenv.capture.server import CaptureServer
from openenv.capture.sync_session import SyncCaptureSession
from openenv.core.polling import settle
from openenv.soak.faults import FaultProxy

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

USER_TURNS = ("Hello there.", "Go on.", "And then?")
WAIT_S = 120.0  # the most any step below waits for the event it needs (it comes in about a second)


@pytest.fixture
def replies() -> list[dict[str, Any]]:
    """Every vLLM completion reply that made it back (status 200), via the backend's `on_reply`."""
    return []


@pytest.fixture(autouse=True)
def rejoin_grace_past_the_test(monkeypatch: pytest.MonkeyPatch) -> None:
    """The proxy keeps a disconnected request's generation `REJOIN_GRACE_S` (3 s) for a resent copy to
    join. The OpenAI SDK resends after 0.375-0.5 s of backoff, so whether its retry lands inside that
    window is up to the scheduler; here it always does, so the test is about what happens then."""
    monkeypatch.setattr(model_routes, "REJOIN_GRACE_S", 600.0)


class Client:
    """The HTTP client under an SDK (httpx or httpx2, the library the SDK uses; nothing in the SDK is
    replaced), watched through its event hooks: what each attempt carried and what it got. `give_up()`
    does what the client's timeout does (close the connection mid-wait), at the moment the test picks;
    `hold_retries` keeps a retry from being sent until the test lets it go."""

    def __init__(self, lib: Any = httpx2) -> None:
        self.sent: list[str] = []  # x-stainless-retry-count of each attempt sent ("-" when unnumbered)
        self.answered: list[tuple[str, int]] = []  # (retry count, status) of each attempt answered
        self.digests: list[str] = []  # each attempt's body, as the proxy keys retries
        self.retrying = threading.Event()  # a retry is about to be sent: the client saw its attempt fail
        self.send_retry = threading.Event()
        self.send_retry.set()
        self._socket: socket.socket | None = None
        # No keep-alive: each attempt gets its own connection, so `give_up` ends exactly the one in flight.
        self.http = lib.Client(
            timeout=WAIT_S,
            limits=lib.Limits(max_keepalive_connections=0),
            event_hooks={"request": [self._sending], "response": [self._seen]},
        )

    def give_up(self) -> None:
        assert self._socket is not None
        self._socket.shutdown(socket.SHUT_RDWR)

    def _sending(self, request: httpx.Request | httpx2.Request) -> None:
        number = request.headers.get("x-stainless-retry-count", "-")
        self.sent.append(number)
        self.digests.append(xxhash.xxh3_128_hexdigest(request.content))
        request.extensions["trace"] = self._trace
        if number not in ("-", "0"):
            self.retrying.set()
            assert self.send_retry.wait(WAIT_S)

    def _trace(self, event: str, info: dict[str, Any]) -> None:
        if event == "connection.connect_tcp.complete":
            self._socket = info["return_value"].get_extra_info("socket")

    def _seen(self, response: httpx.Response | httpx2.Response) -> None:
        self.answered.append(
            (response.request.headers.get("x-stainless-retry-count", "-"), response.status_code)
        )


def joined(session: SyncCaptureSession, digest: str) -> bool:
    """Whether a resent copy of the in-flight request `digest` is waiting on its answer."""

    async def shared() -> bool:
        return session.session.shared(digest)

    return call_on_loop(session.session.loop, shared(), WAIT_S)


def wait_for(condition: Callable[[], bool], what: str) -> None:
    assert settle(condition, bool, wait_s=WAIT_S), f"{what}: not within {WAIT_S:g} s"


@pytest.mark.parametrize("retry_lands", ["while_answering", "after_recorded"])
def test_a_client_that_gives_up_before_the_backend_answers_still_records_the_turn_once(
    retry_lands: str,
    fault_proxy: FaultProxy,
    renderer: Renderer,
    replies: list[dict[str, Any]],
    figures: Any,
) -> None:
    """The OpenAI SDK gives up on turn 2 while vLLM's answer is held back, and retries on its own (a
    numbered retry). The retry reads the answer the first attempt gets (it joins it, or it is replayed
    from the record): one backend call, one recorded turn, no gap, and turn 3 extends the reply the SDK
    actually got."""
    backend = VLLMBackend(fault_proxy.url, timeout=WAIT_S, on_reply=replies.append)
    with CaptureServer(backend=backend, renderer=renderer) as server:
        session = server.open_session(mode="auto", sampling=SamplingParams(max_tokens=8, temperature=1.0))
        wire = Client(httpx2)
        client = openai.OpenAI(
            base_url=session.base_url + "/v1", api_key=session.token, max_retries=2, http_client=wire.http
        )
        messages: list[Any] = []

        def ask() -> None:
            reply = client.chat.completions.create(model="tiny", messages=messages)
            messages.append(
                reply.choices[0].message.model_dump(exclude_none=True, exclude={"annotations", "parsed"})
            )

        for i, text in enumerate(USER_TURNS):
            messages.append({"role": "user", "content": text})
            if i != 1:
                ask()
                continue
            calls_before = fault_proxy.stats["requests"]
            fault_proxy.set("hold", count=1)
            wire.send_retry.clear()
            with ThreadPoolExecutor(1) as pool:
                asked = pool.submit(ask)
                assert fault_proxy.held(WAIT_S), "turn 2 never reached the backend"
                wire.give_up()  # the backend is blocked now, and stays so until released below
                assert wire.retrying.wait(WAIT_S), "the SDK did not retry"
                answered_when_retried = len(replies)
                if retry_lands == "after_recorded":
                    fault_proxy.release()
                    wait_for(lambda: session.stats().turns == 2, "the first attempt was not recorded")
                    wire.send_retry.set()
                else:
                    wire.send_retry.set()
                    wait_for(
                        lambda: joined(session, wire.digests[1]), "the retry did not join the first attempt"
                    )
                    fault_proxy.release()
                asked.result(WAIT_S)
        records, stats, rows = session.turns(), session.stats(), session.sequences()
    calls = fault_proxy.stats["requests"] - calls_before  # turns 2 and 3
    figures.record(
        retry_lands=retry_lands,
        sdk_sent=wire.sent,
        sdk_answered=wire.answered,
        backend_calls_turns_2_3=calls,
        backend_generations=len(replies),
        recorded_turns=stats.turns,
        gaps=stats.gaps,
        sequences=stats.sequences,
        merge_ratio=stats.merge_ratio,
    )

    assert answered_when_retried == 1, "the client gave up while turn 2 was still unanswered"
    assert wire.sent == ["0", "0", "1", "0"] and wire.answered == [("0", 200), ("1", 200), ("0", 200)]
    assert wire.digests[1] == wire.digests[2], "the SDK resent the same bytes"
    # one backend call and one recorded turn per conversation turn: the retry made nothing new
    assert calls == 2 and fault_proxy.stats["hold"] == 1 and len(replies) == len(USER_TURNS)
    assert stats.turns == len(records) == len(USER_TURNS) and stats.gaps == 0, [r.gap for r in records]
    assert (stats.sequences, stats.merge_ratio) == (1, 1.0)
    sdk_replies = [m.get("content") or "" for m in messages if m["role"] == "assistant"]
    assert [r.completion.text if r.completion else None for r in records] == sdk_replies
    assert [row.turn_ids for row in rows] == [[r.id for r in records]]


def test_an_unnumbered_retry_of_a_request_still_being_answered_shares_it(
    fault_proxy: FaultProxy,
    renderer: Renderer,
    replies: list[dict[str, Any]],
    figures: Any,
) -> None:
    """google-genai and codex number no retries. A client that gives up on a slow turn and sends the same
    bytes again, unmarked, while the first attempt is still being answered gets that answer: one backend
    call, one recorded turn, and the reply it reads is the recorded one."""
    backend = VLLMBackend(fault_proxy.url, timeout=WAIT_S, on_reply=replies.append)
    with CaptureServer(backend=backend, renderer=renderer) as server:
        session = server.open_session(mode="auto", sampling=SamplingParams(max_tokens=8, temperature=1.0))
        url = f"{session.base_url}/v1beta/models/tiny:generateContent"
        body = json.dumps({"contents": [{"role": "user", "parts": [{"text": "Hello there."}]}]}).encode()
        headers = {"content-type": "application/json"}
        call_on_loop(session.session.loop, backend.ready(), WAIT_S)  # its GET /v1/models, before the hold
        calls_before = fault_proxy.stats["requests"]
        fault_proxy.set("hold", count=1)
        wire = Client(httpx)
        with wire.http, ThreadPoolExecutor(1) as pool:
            first = pool.submit(wire.http.post, url, content=body, headers=headers)
            assert fault_proxy.held(WAIT_S), "the request never reached the backend"
            wire.give_up()
            with pytest.raises(httpx.TransportError):
                first.result(WAIT_S)
            resent = pool.submit(wire.http.post, url, content=body, headers=headers)
            wait_for(
                lambda: joined(session, wire.digests[0]), "the resent copy did not join the first attempt"
            )
            fault_proxy.release()
            retried = resent.result(WAIT_S)
        [record], stats = session.turns(), session.stats()
    calls = fault_proxy.stats["requests"] - calls_before
    figures.record(
        backend_calls=calls, backend_generations=len(replies), recorded_turns=stats.turns, gaps=stats.gaps
    )
    assert retried.status_code == 200
    assert len(replies) == 1 and fault_proxy.stats["hold"] == 1 and stats.turns == 1 and stats.gaps == 0
    [part] = retried.json()["candidates"][0]["content"]["parts"]
    assert record.completion is not None and part["text"] == record.completion.text
