"""The proxy protects the host from its own sessions (issue 30, finding 5).

With its own session token the agent sent a ~127k-token prompt and four concurrent 8 MB bodies to the
local backend: the host's `openenv run` reached 9.3 GB RSS and stayed at 100% CPU after the episode.
What holds it now, each shown here on the real in-process backend:
- scoring computes logits only for the completion's positions (peak memory measured in a fresh process);
- a session has at most `TurnLimits.max_inflight` requests in progress (a retryable 429 past it);
- a prompt that cannot fit the window, or a supplied reply that overflows it, is refused before it is
  parked or scored.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import httpx

from openenv.capture.canonical import SamplingParams
from openenv.capture.session import TurnLimits

SCORE = """
import asyncio, random, resource, sys
from openenv.capture.backends.local import LocalBackend
backend = LocalBackend(sys.argv[1])
random.seed(0)
prompt = [random.randrange(10, 4000) for _ in range(int(sys.argv[2]))]
asyncio.run(backend.score(prompt[:64], [5, 6]))
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
asyncio.run(backend.score(prompt, [5, 6, 7]))
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024)
"""


def test_scoring_a_long_prompt_does_not_build_its_logits(tiny_model: Path, figures) -> None:
    n = 16384
    vocab = json.loads((tiny_model / "config.json").read_text())["vocab_size"]
    logits_bytes = n * vocab * 4  # what the old full-prompt logits took, before log_softmax copied them
    out = subprocess.run(
        [sys.executable, "-c", SCORE, str(tiny_model), str(n)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=Path(__file__).parents[2],
    )
    assert out.returncode == 0, out.stderr[-2000:]
    grew = int(out.stdout.split()[-1])
    figures.record(
        attack=f"score a {n}-token prompt (peak RSS growth)",
        attacker="agent",
        sandbox="local-backend",
        blocked=grew < logits_bytes // 2,
        peak_growth_mb=grew >> 20,
        logits_mb=logits_bytes >> 20,
    )
    assert grew < logits_bytes // 2, (
        f"scoring grew the peak RSS by {grew >> 20} MB (full logits: {logits_bytes >> 20} MB)"
    )


def test_a_flood_on_one_session_is_held_at_its_in_flight_cap(make_proxy, figures) -> None:
    proxy = make_proxy(limits=TurnLimits(max_inflight=2))
    session = proxy.open_session(mode="gated", sampling=SamplingParams(max_tokens=4))

    def body(
        i: int,
    ) -> dict[str, object]:  # distinct: an identical body in flight is shared, not answered twice
        return {
            "model": "tiny",
            "messages": [{"role": "user", "content": f"{i} " + "x" * 2_000}],
            "max_tokens": 4,
        }

    url = session.base_url + "/v1/chat/completions"
    codes: list[int] = []
    held = [
        threading.Thread(
            target=lambda i=i: codes.append(httpx.post(url, json=body(i), timeout=300).status_code)
        )
        for i in range(2)
    ]
    for thread in held:
        thread.start()
    parked = [session.next_pending(timeout=120) for _ in range(2)]  # both in progress (parked for us)
    assert all(p is not None for p in parked)
    third = httpx.post(url, json=body(2), timeout=120)
    for pending in parked:
        pending.complete(text="ok")
    for thread in held:
        thread.join(120)
    figures.record(
        attack="a third concurrent big body on one session (cap 2)",
        attacker="agent",
        sandbox="local-backend",
        blocked=third.status_code == 429,
    )
    assert third.status_code == 429 and "session_busy" in third.text, third.text
    assert codes == [200, 200]


def test_a_prompt_past_the_window_is_refused_before_it_is_parked(make_proxy, local_backend, figures) -> None:
    proxy = make_proxy()
    session = proxy.open_session(mode="gated", sampling=SamplingParams(max_tokens=4))
    window = local_backend.context_window
    # Each "é " is at least one token; enough of them overflow the window whatever the merges.
    body = {"model": "tiny", "messages": [{"role": "user", "content": "é " * (window + 10)}], "max_tokens": 4}
    replies: list[httpx.Response] = []
    sender = threading.Thread(
        target=lambda: replies.append(
            httpx.post(session.base_url + "/v1/chat/completions", json=body, timeout=600)
        )
    )
    sender.start()
    sender.join(300)  # refused at once now; the old code parked it for a controller (and the client hung)
    parked = None if replies else session.next_pending(timeout=5)
    if parked is not None:
        parked.complete(text="ok")  # let the old code's client go, then fail below
        sender.join(300)
    refused = parked is None and replies and replies[0].status_code == 400
    figures.record(
        attack="a prompt longer than the context window",
        attacker="agent",
        sandbox="local-backend",
        blocked=bool(refused),
    )
    assert refused and "context window" in replies[0].text, (
        parked,
        replies[0].text[:300] if replies else None,
    )
    assert session.turns() == []


def test_a_half_sent_body_is_answered_408_not_held_open(make_proxy, monkeypatch, figures) -> None:
    """Headers and 10 bytes of a 100-byte body, then silence: the proxy answers 408 once the body's read
    deadline passes (issue 30, finding 10; it used to wait forever)."""
    import socket as sockets
    import time

    from openenv.capture.routes import model as model_routes

    monkeypatch.setattr(model_routes, "BODY_READ_TIMEOUT_S", 1.0, raising=False)
    proxy = make_proxy()
    session = proxy.open_session(mode="auto", sampling=SamplingParams(max_tokens=4))
    path = session.base_url.split(f":{proxy.port}", 1)[1] + "/v1/chat/completions"
    with sockets.create_connection(("127.0.0.1", proxy.port), timeout=30) as conn:
        conn.sendall(
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            'Content-Length: 100\r\n\r\n{"model": '.encode()
        )
        start = time.monotonic()
        try:
            answer = conn.recv(4096).decode("latin-1")  # blocks until the proxy answers (or 30 s pass)
        except TimeoutError:
            answer = ""  # the old proxy: still waiting for the rest of the body
        waited = time.monotonic() - start
    figures.record(
        attack="a half-sent body held open",
        attacker="agent",
        sandbox="proxy",
        blocked=answer.startswith("HTTP/1.1 408"),
        answered_after_s=round(waited, 2),
    )
    assert answer.startswith("HTTP/1.1 408"), answer[:300]
    assert waited < 20
