"""Backend faults mid-conversation, seen through each dialect's official SDK with its own retries on.

A `FaultProxy` sits between the capture proxy and the real vLLM server. Turn 1 is answered; then the
next two backend calls go down (TCP reset), slow (past the backend client's timeout) or fail (HTTP 500).
The SDK must get its dialect's retryable error (OpenAI 503, Anthropic 529 `overloaded_error`, Gemini
503 `UNAVAILABLE`), retry by itself and finish the conversation. The trajectory must mark each failed
attempt as a gap, record each conversation turn exactly once, and still form one token-exact sequence
whose model tokens are the ones vLLM sampled.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import anthropic
import httpx
import httpx2
import openai
import pytest
from google import genai
from google.genai import types as gtypes

from openenv.capture.backends import VLLMBackend
from openenv.capture.canonical import SamplingParams
from openenv.capture.renderer import Renderer
from openenv.capture.server import CaptureServer
from openenv.capture.sync_session import SyncCaptureSession
from openenv.harness.catalog import get_spec
from openenv.harness.environment import EpisodeSettings, HarnessEnvironment
from openenv.harness.install import install_status
from openenv.harness.models import HarnessObservation
from openenv.harness.rollout import run_episode
from openenv.harness.tasks import builtin_task
from openenv.soak.faults import FaultMode, FaultProxy

pytestmark = [pytest.mark.vllm]

BACKEND_TIMEOUT_S = 3.0  # the capture proxy's read timeout on vLLM: a `slow` backend becomes a gap
# The read timeout where no fault needs one (down, error). A short one there would make every *healthy* vLLM
# call race it too: at load 13-24 on 2 shared cores a healthy call took up to 0.9 s (median 0.05 s), and one
# that ever took 3 s (a stalled process: the fault proxy and the capture proxy share the test's GIL) became
# an unplanned gap, an extra 503 and a wrong attempt list.
UNHURRIED_TIMEOUT_S = 120.0
FAULTS: dict[str, dict[str, Any]] = {
    "down": {"mode": "down"},
    "slow": {"mode": "slow", "delay_s": BACKEND_TIMEOUT_S + 3},
    "error": {"mode": "error", "status": 500},
}
FAILED_CALLS = 2  # backend calls that fail in a row; every SDK below retries at least 3 times
GREEDY = SamplingParams(max_tokens=8, temperature=0.0)
USER_TURNS = ("Hello there.", "Go on.", "And then?")


class Wire:
    """What an SDK put on the wire: each attempt's status and Stainless retry count (a plain client of the
    SDK's own HTTP library, httpx2 or httpx, with an event hook; nothing in the SDK is replaced)."""

    def __init__(self) -> None:
        self.attempts: list[tuple[str, int]] = []  # (x-stainless-retry-count or "-", status)
        self.http = httpx.Client(timeout=120, event_hooks={"response": [self._seen]})
        self.http2 = httpx2.Client(
            timeout=120, event_hooks={"response": [self._seen]}
        )  # openai's, anthropic's

    def _seen(self, response: httpx.Response | httpx2.Response) -> None:
        self.attempts.append(
            (response.request.headers.get("x-stainless-retry-count", "-"), response.status_code)
        )


# ---- one text conversation per dialect, in each SDK's own types, retries on ------------------------------


class ChatClient:
    def __init__(self, session: SyncCaptureSession, wire: Wire) -> None:
        self.client = openai.OpenAI(
            base_url=session.base_url + "/v1", api_key=session.token, max_retries=3, http_client=wire.http2
        )
        self.messages: list[Any] = []

    def send(self, text: str) -> None:
        self.messages.append({"role": "user", "content": text})
        message = self.client.chat.completions.create(model="tiny", messages=self.messages).choices[0].message
        self.messages.append(message.model_dump(exclude_none=True, exclude={"annotations", "parsed"}))


class ResponsesClient:
    def __init__(self, session: SyncCaptureSession, wire: Wire) -> None:
        self.client = openai.OpenAI(
            base_url=session.base_url + "/v1", api_key=session.token, max_retries=3, http_client=wire.http2
        )
        self.input: list[Any] = []

    def send(self, text: str) -> None:
        self.input.append({"role": "user", "content": text})
        response = self.client.responses.create(model="tiny", instructions="Be brief.", input=self.input)
        self.input += [item.model_dump(exclude_none=True) for item in response.output]


class AnthropicClient:
    def __init__(self, session: SyncCaptureSession, wire: Wire) -> None:
        self.client = anthropic.Anthropic(
            base_url=session.base_url, api_key=session.token, max_retries=3, http_client=wire.http2
        )
        self.messages: list[Any] = []

    def send(self, text: str) -> None:
        self.messages.append({"role": "user", "content": text})
        with self.client.messages.stream(model="tiny", max_tokens=64, messages=self.messages) as stream:
            message = stream.get_final_message()  # streamed: the 529 comes before the first event
        self.messages.append({"role": "assistant", "content": [b.model_dump() for b in message.content]})


class GeminiClient:
    def __init__(self, session: SyncCaptureSession, wire: Wire) -> None:
        retry = gtypes.HttpRetryOptions(attempts=4, initial_delay=0.3, max_delay=2.0, jitter=0.2)
        options = gtypes.HttpOptions(
            base_url=session.base_url, api_version="v1beta", retry_options=retry, httpx_client=wire.http
        )
        self.client = genai.Client(api_key=session.token, http_options=options)
        self.contents: list[gtypes.Content] = []

    def send(self, text: str) -> None:
        self.contents.append(gtypes.Content(role="user", parts=[gtypes.Part(text=text)]))
        reply = self.client.models.generate_content(model="tiny", contents=self.contents)
        assert reply.candidates and reply.candidates[0].content is not None
        self.contents.append(gtypes.Content(role="model", parts=reply.candidates[0].content.parts or []))


CLIENTS: dict[str, Callable[[SyncCaptureSession, Wire], Any]] = {
    "openai_chat": ChatClient,
    "openai_responses": ResponsesClient,
    "anthropic": AnthropicClient,
    "gemini": GeminiClient,
}
# The dialect's retryable error for a backend outage, and whether the SDK numbers its retries.
RETRYABLE = {
    "openai_chat": (503, True),
    "openai_responses": (503, True),
    "anthropic": (529, True),
    "gemini": (503, False),
}


@pytest.fixture
def replies() -> list[dict[str, Any]]:
    """Every vLLM completion reply that made it back (status 200), via the backend's `on_reply`."""
    return []


@pytest.fixture
def serve(
    fault_proxy: FaultProxy, renderer: Renderer, replies: list[dict[str, Any]]
) -> Iterator[Callable[[float], CaptureServer]]:
    """`serve(timeout)`: a started capture proxy on vLLM through the fault proxy, with that backend read
    timeout; stopped when the test ends."""
    started: list[CaptureServer] = []

    def start(timeout: float) -> CaptureServer:
        backend = VLLMBackend(fault_proxy.url, timeout=timeout, on_reply=replies.append)
        started.append(CaptureServer(backend=backend, renderer=renderer).start())
        return started[-1]

    yield start
    for capture in started:
        capture.stop()


@pytest.fixture
def server(serve: Callable[[float], CaptureServer]) -> CaptureServer:
    """A capture proxy whose backend read timeout is `BACKEND_TIMEOUT_S`."""
    return serve(BACKEND_TIMEOUT_S)


@pytest.mark.parametrize(
    "fault", [pytest.param(f, marks=[pytest.mark.slow] if f == "slow" else []) for f in FAULTS]
)
@pytest.mark.parametrize("dialect", list(CLIENTS))
def test_sdk_retries_through_a_backend_fault_and_every_attempt_is_accounted_for(
    dialect: str,
    fault: str,
    serve: Callable[[float], CaptureServer],
    fault_proxy: FaultProxy,
    replies: list[dict[str, Any]],
    figures: Any,
) -> None:
    # Only the slow fault needs a short read timeout; elsewhere one would put every healthy call on a clock.
    server = serve(BACKEND_TIMEOUT_S if fault == "slow" else UNHURRIED_TIMEOUT_S)
    session = server.open_session(mode="auto", sampling=GREEDY)
    wire = Wire()
    client = CLIENTS[dialect](session, wire)
    client.send(USER_TURNS[0])
    mode: FaultMode = FAULTS[fault]["mode"]
    fault_proxy.set(count=FAILED_CALLS, **FAULTS[fault])
    start = time.monotonic()
    client.send(USER_TURNS[1])  # fails FAILED_CALLS times inside the SDK, then succeeds
    recovered_s = time.monotonic() - start
    client.send(USER_TURNS[2])

    records, stats, rows = session.turns(), session.stats(), session.sequences()
    gaps = [r for r in records if r.gap is not None]
    answered = [r for r in records if r.gap is None]
    figures.record(
        dialect=dialect,
        fault=fault,
        sdk_attempts=len(records),
        gaps=len(gaps),
        retries=len(records) - len(USER_TURNS),
        recovered_s=round(recovered_s, 2),
        sdk_saw=[status for _, status in wire.attempts],
        turns=stats.turns,
        sequences=stats.sequences,
        merge_ratio=stats.merge_ratio,
    )

    # the SDK saw its dialect's retryable error for each failed attempt, and retried on its own
    status, numbered = RETRYABLE[dialect]
    assert [code for _, code in wire.attempts] == [200, status, status, 200, 200]
    if numbered:
        assert [n for n, _ in wire.attempts] == ["0", "0", "1", "2", "0"]

    assert fault_proxy.stats[mode] == FAILED_CALLS
    assert len(gaps) == stats.gaps == FAILED_CALLS, [r.gap for r in records]
    assert all("BackendUnavailable" in (r.gap or "") for r in gaps)
    assert [r.index for r in gaps] == [1, 2], "the gaps are the failed attempts at turn 2, in order"
    # each conversation turn is recorded once, and the retries were new attempts, not replays
    assert len(answered) == stats.turns == len(USER_TURNS) == len(replies)
    assert len({r.id for r in answered}) == len(USER_TURNS)
    assert (stats.sequences, stats.merge_ratio) == (1, 1.0)
    [row] = rows
    assert row.turn_ids == [r.id for r in answered]
    # the model tokens are exactly what vLLM sampled, with its logprobs
    sampled = [tok for reply in replies for tok in reply["choices"][0]["token_ids"]]
    logprobs = [lp for reply in replies for lp in reply["choices"][0]["logprobs"]["token_logprobs"]]
    model_span = [i for i, m in enumerate(row.env_mask) if m == 1]
    assert [row.completion_ids[i] for i in model_span] == sampled
    assert [row.logprobs[i] for i in model_span] == logprobs
    for record, reply in zip(answered, replies, strict=True):
        assert record.completion is not None
        assert list(record.completion.token_ids) == reply["choices"][0]["token_ids"]


def test_the_backend_client_times_out_so_a_stalled_backend_is_a_gap_not_a_hang(
    server: CaptureServer,
    fault_proxy: FaultProxy,
    figures: Any,
) -> None:
    """With no SDK retries, one stalled backend call reaches the client as a 503 after the backend
    timeout (not after the stall) and leaves exactly one gap."""
    session = server.open_session(mode="auto", sampling=GREEDY)
    client = openai.OpenAI(base_url=session.base_url + "/v1", api_key=session.token, max_retries=0)
    fault_proxy.set("slow", delay_s=60.0)
    start = time.monotonic()
    with pytest.raises(openai.InternalServerError) as caught:
        client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "hi"}])
    waited = time.monotonic() - start
    figures.record(backend_timeout_s=BACKEND_TIMEOUT_S, time_to_error_s=round(waited, 2))
    assert caught.value.status_code == 503 and caught.value.body["type"] == "service_unavailable"  # type: ignore[index]
    assert BACKEND_TIMEOUT_S <= waited < BACKEND_TIMEOUT_S + 3
    assert session.stats().gaps == 1 and "ReadTimeout" in (session.turns()[0].gap or "")


# ---- a real harness: pi, driven by the oracle policy, every turn scored by vLLM through the fault proxy ----


# (fault, faulted backend calls, env turn timeout): an outage the harness's SDK retries through, and a
# backend that stalls past the env's turn timeout (the turn must end as a gap at that timeout, so the
# harness retries then, instead of the step hanging for the backend's own timeout or raising).
HARNESS_FAULTS = {
    "down": ({"mode": "down"}, FAILED_CALLS, 300.0),
    "stalled": ({"mode": "slow", "delay_s": 120.0}, 1, 15.0),
}


@pytest.mark.slow
@pytest.mark.parametrize("fault", list(HARNESS_FAULTS))
def test_pi_retries_through_a_backend_fault_and_the_episode_completes(
    fault: str,
    fault_proxy: FaultProxy,
    renderer: Renderer,
    leaks: Any,
    figures: Any,
) -> None:
    """Turn 1 (look) is answered; then backend calls fail. Pi retries on its own, the episode still
    solves the task, each failed attempt is one gap, and every turn is in the one sequence exactly once.
    Nothing is left running and no proxy session stays open."""
    if not install_status(get_spec("pi")).ready:
        pytest.skip("pi is not installed; run scripts/install_harnesses.sh pi")
    how, failed, turn_timeout_s = HARNESS_FAULTS[fault]
    steps: list[tuple[float, bool]] = []  # (time, armed before this step)

    def fault_after_turn_one(obs: HarnessObservation) -> None:
        leaks.snapshot()
        armed = not any(a for _, a in steps) and obs.pending is not None and not obs.pending.aux
        if armed and obs.turns == 1:
            fault_proxy.set(count=failed, **how)
        steps.append((time.monotonic(), armed and obs.turns == 1))

    with CaptureServer(backend=VLLMBackend(fault_proxy.url, timeout=300), renderer=renderer) as server:
        env = HarnessEnvironment("pi", server=server, settings=EpisodeSettings(turn_timeout_s=turn_timeout_s))
        try:
            obs, summary = run_episode(
                env,
                builtin_task("fix-deep-merge"),
                policy="oracle",
                look_first=True,
                on_step=fault_after_turn_one,
                timeout_s=240,
            )
            records = env.trajectory()
        finally:
            env.close()
        open_sessions = len(server.registry.sessions)
    leftover = leaks.settle()
    main = [r for r in records if not r.aux]
    gaps = [r for r in main if r.gap is not None]
    answered = [r for r in main if r.gap is None]
    faulted = next(i for i, (_, armed) in enumerate(steps) if armed)
    faulted_step_s = steps[faulted + 1][0] - steps[faulted][0]
    figures.record(
        harness="pi",
        fault=fault,
        reward=summary.reward,
        status=summary.status,
        turns=summary.turns,
        gaps=len(gaps),
        faults_injected=fault_proxy.stats[how["mode"]],
        turn_timeout_s=turn_timeout_s,
        faulted_step_s=round(faulted_step_s, 2),
        sequences=summary.sequences,
        merge_ratio=summary.merge_ratio,
        wall_s=summary.wall_s,
        leaked_processes=len(leftover),
        open_sessions=open_sessions,
    )

    detail = f"{summary}\n{obs.output_tail}\n{obs.metadata}"
    assert fault_proxy.stats[how["mode"]] == failed, detail
    assert summary.reward == 1.0 and summary.status == "exited", detail
    assert len(gaps) == failed and all("BackendUnavailable" in (r.gap or "") for r in gaps), detail
    assert len(obs.metadata["errors"]) == failed, "the controller heard of each failed attempt"
    if fault == "stalled":  # the step came back at the turn timeout, with pi's retry already pending
        assert "turn timeout" in (gaps[0].gap or "")
        assert turn_timeout_s <= faulted_step_s < turn_timeout_s + 20, faulted_step_s
    retried = answered[1]  # the turn after the fault is the same request, asked again
    assert {r.prompt_len for r in gaps} == {retried.prompt_len} and gaps[-1].index < retried.index
    [row] = obs.sequences or []
    assert row.turn_ids == [r.id for r in answered] and len(set(row.turn_ids)) == summary.turns == len(
        answered
    )
    assert summary.merge_ratio == 1.0
    assert sum(row.env_mask) == sum(len(r.completion.token_ids) for r in answered if r.completion)
    assert leftover == [] and open_sessions == 0
