"""Attacks and faults on a real `openenv proxy` process: one client must not stall the others, a client
that leaves must not keep a core busy, SIGTERM ends the process, and SIGKILL loses no answered turn.

Each test is the attack itself against the standalone proxy as users run it (a subprocess on the tiny
model, local backend unless it says vLLM), and records its figure for docs/benchmarks.md.
"""

from __future__ import annotations

import json
import re
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import openai
import psutil
import pytest

from openenv.capture.routes.model import REJOIN_GRACE_S
from openenv.core.net import free_port

pytestmark = pytest.mark.slow

OPENENV = [sys.executable, "-m", "openenv.cli.main"]
LONG = {
    "model": "tiny",
    "max_tokens": 4000,
    "temperature": 1.0,
    "seed": 0,
    "messages": [{"role": "user", "content": "write a very long story"}],
}


@dataclass
class Proxy:
    proc: subprocess.Popen[str]
    base: str
    admin: str
    key: str
    journal: Path
    lines: list[str]

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"}

    def open(self, **body: Any) -> tuple[str, str]:
        reply = httpx.post(f"{self.admin}/sessions", json=body, headers=self.auth, timeout=30)
        assert reply.status_code == 201, reply.text
        return reply.json()["token"], reply.json()["base_url"]

    def cpu_s(self) -> float:
        times = psutil.Process(self.proc.pid).cpu_times()
        return float(times.user + times.system)

    def cores_busy(self, seconds: float) -> float:
        """The proxy's CPU use over the next `seconds`, in cores."""
        before, t0 = self.cpu_s(), time.monotonic()
        time.sleep(seconds)
        return (self.cpu_s() - before) / (time.monotonic() - t0)

    def wait_generating(self, waiting: Callable[[], bool], timeout_s: float = 120.0) -> float:
        """Return once the proxy is seen generating (> 0.1 cores over a 0.5 s window) while its client
        still waits for the reply (`waiting()`); returns those cores. Polls instead of sleeping a guessed
        time: the first turn starts when the (shared) machine lets it, and the random tiny model ends its
        reply when it samples its end-of-turn token (1112 of the 4000 tokens allowed, measured here), not
        at `max_tokens`, so neither its start nor its end is a fixed time after the request."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not waiting():
                pytest.fail(
                    "the reply came back before the test saw the generation running: the model ended it "
                    "early (end-of-turn sampled); the test needs a longer generation"
                )
            cores = self.cores_busy(0.5)
            if cores > 0.1 and waiting():
                return cores
        pytest.fail(f"the proxy did not start generating within {timeout_s:g} s")

    def wait_idle(self, timeout_s: float) -> tuple[float, float]:
        """Poll until the proxy uses < 0.05 cores over two 0.5 s windows in a row (one could be a moment the
        loaded machine did not schedule it); (seconds it took, the cores of the last window)."""
        start, quiet = time.monotonic(), 0
        while time.monotonic() - start < timeout_s:
            cores = self.cores_busy(0.5)
            quiet = quiet + 1 if cores < 0.05 else 0
            if quiet == 2:
                break
        return time.monotonic() - start, cores


def start_proxy(tiny_model: Path, journal: Path, *extra: str) -> Proxy:
    """`openenv proxy` with its defaults (generated admin key, admin port of its own, fsynced journal)."""
    cmd = [
        *OPENENV,
        "proxy",
        "--model",
        str(tiny_model),
        "--port",
        str(free_port()),
        "--journal-dir",
        str(journal),
        *extra,
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line and proc.poll() is not None:
            pytest.fail(f"openenv proxy exited {proc.returncode}:\n" + "".join(lines))
        lines.append(line)
        if line.startswith("journal:"):
            break
    else:
        proc.kill()
        pytest.fail("openenv proxy did not start:\n" + "".join(lines))
    threading.Thread(target=_drain, args=(proc, lines), daemon=True).start()
    text = "".join(lines)
    base, admin = re.search(r"capture proxy on (\S+) .*POST (\S+)/sessions", text).groups()  # type: ignore[union-attr]
    key = re.search(r"admin key \(shown once.*\): (\S+)", text)
    return Proxy(proc, base, admin, key.group(1) if key else "", journal, lines)


def _drain(proc: subprocess.Popen[str], lines: list[str]) -> None:
    assert proc.stdout is not None
    lines.extend(proc.stdout)  # keeps the pipe drained (a full pipe would block the proxy's logging)


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait(30)


@pytest.fixture(scope="module")
def proxy(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Proxy]:
    """One proxy shared by the attacks that leave it running."""
    p = start_proxy(tiny_model, tmp_path_factory.mktemp("journal"))
    yield p
    _stop(p.proc)


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


def _models_latency(url: str, stop: threading.Event, out: list[float]) -> None:
    with httpx.Client(timeout=30) as http:
        while not stop.is_set():
            t0 = time.perf_counter()
            assert http.get(url).status_code == 200
            out.append(time.perf_counter() - t0)
            time.sleep(0.01)


def _while_probing(url: str, attack: Callable[[], Any]) -> tuple[Any, list[float]]:
    """Run `attack` while another client polls `url`; (attack's result, the probe's latencies in s)."""
    stop, latencies = threading.Event(), []
    prober = threading.Thread(target=_models_latency, args=(url, stop, latencies))
    prober.start()
    try:
        _until(lambda: len(latencies) >= 3, "the probe got no answers before the attack")
        result = attack()
        seen = len(latencies)
        _until(lambda: len(latencies) >= seen + 3, "the probe got no answers after the attack")
    finally:
        stop.set()
        prober.join(60)
    return result, latencies


def test_a_40_mib_body_is_refused_without_stalling_other_clients(proxy: Proxy, figures: Any) -> None:
    figures.record(attack="40 MiB body (declared and chunked) + a 4 MiB body, /v1/models probed meanwhile")
    token, base_url = proxy.open()
    models = f"{base_url}/v1/models"
    huge = (
        b'{"model":"tiny","max_tokens":1,"messages":[{"role":"user","content":"' + b"a" * (40 << 20) + b'"}]}'
    )

    def send_huge() -> list[httpx.Response]:
        with httpx.Client(timeout=120) as http:
            declared = http.post(
                f"{base_url}/v1/chat/completions", content=huge, headers={"content-type": "application/json"}
            )
            chunked = http.post(
                f"{base_url}/v1/messages",
                content=iter([huge[i : i + (1 << 20)] for i in range(0, len(huge), 1 << 20)]),
                headers={"content-type": "application/json", "x-api-key": token},
            )
        return [declared, chunked]

    (declared, chunked), latencies = _while_probing(models, send_huge)
    assert (
        declared.status_code == 413 and declared.json()["error"]["code"] == "request_too_large"
    )  # OpenAI's shape
    assert (
        chunked.status_code == 413 and chunked.json()["error"]["type"] == "request_too_large"
    )  # Anthropic's
    p99_ms, worst_ms = 1000 * _p99(latencies), 1000 * max(latencies)
    # The probe is sequential: a stalled loop shows as one huge sample (43.6 s before the fix), so the
    # assertion is on the worst probe, far above the <100 ms goal and far below a stall.
    assert len(latencies) >= 5 and worst_ms < 1000, (
        f"/v1/models took {worst_ms:.0f} ms while a 40 MiB body was refused"
    )

    # Under the cap but big (4 MiB of text to parse, render and tokenize): on a worker thread, not the loop.
    big = {"model": "tiny", "max_tokens": 1, "messages": [{"role": "user", "content": "word " * (800 << 10)}]}
    n_tokens, big_latencies = _while_probing(
        models,
        lambda: httpx.post(
            f"{base_url}/v1/messages/count_tokens", json=big, headers={"x-api-key": token}, timeout=300
        ),
    )
    assert n_tokens.status_code == 200 and n_tokens.json()["input_tokens"] > 800_000
    # Recorded, not asserted: the worker thread still takes the GIL in long C calls (the tokenizer), so
    # this figure follows the machine's load (30-650 ms measured); on the event loop it was the whole job.
    big_worst_ms = 1000 * max(big_latencies)
    figures.record(
        blocked=True,
        body_mib=40,
        models_p99_ms=round(p99_ms, 1),
        models_max_ms=round(worst_ms, 1),
        models_probes=len(latencies),
        models_p99_ms_while_4mib_tokenized=round(1000 * _p99(big_latencies), 1),
        models_max_ms_while_4mib_tokenized=round(big_worst_ms, 1),
    )


def test_a_client_that_disconnects_mid_generation_stops_it(proxy: Proxy, figures: Any) -> None:
    figures.record(attack="client disconnects mid-generation (4000-token request)")
    _, base_url = proxy.open()
    client = _raw_post(f"{base_url}/v1/chat/completions", LONG)
    # The generation is running (else this test could not fail), and its client is still waiting.
    generating = proxy.wait_generating(lambda: not _answered(client))
    client.close()  # the client gives up and closes its connection
    left = time.monotonic()
    # The proxy keeps a disconnected request's generation for REJOIN_GRACE_S so that an SDK's resend can
    # join it; after that it must stop (at its next token).
    idle_s, after = proxy.wait_idle(REJOIN_GRACE_S + 15.0)
    stopped_s = time.monotonic() - left
    assert after < 0.05, f"{after:.2f} cores {stopped_s:.0f} s after the only client left"
    assert stopped_s < REJOIN_GRACE_S + 15.0
    figures.record(
        blocked=True,
        cores_while_generating=round(generating, 2),
        cores_after_grace=round(after, 3),
        seconds_to_idle=round(stopped_s, 2),
    )


def test_a_body_nested_50000_deep_gets_a_generic_error_in_the_dialect(proxy: Proxy, figures: Any) -> None:
    figures.record(attack="JSON body nested 50,000 deep (OpenAI and Anthropic routes)")
    token, base_url = proxy.open()
    nested = b"[" * 50_000 + b"]" * 50_000
    body = b'{"model":"tiny","max_tokens":4,"messages":[{"role":"user","content":' + nested + b"}]}"
    with httpx.Client(timeout=60) as http:
        for route, headers in (("/v1/chat/completions", {}), ("/v1/messages", {"x-api-key": token})):
            reply = http.post(
                base_url + route, content=body, headers={"content-type": "application/json", **headers}
            )
            assert reply.status_code in (400, 500), reply.text
            message = reply.json()["error"]["message"]
            assert "Recursion" not in message and "recursion" not in message and "Traceback" not in message
            assert reply.status_code == 400 or re.search(r"internal error \(id [0-9a-f]{12}\)", message)
            assert reply.headers.get("connection") != "close"
        assert http.get(f"{base_url}/v1/models").status_code == 200  # same client, server still answers
    figures.record(blocked=True, nested_depth=50_000, status=reply.status_code)


def test_a_sigkilled_proxy_loses_no_answered_turn(tiny_model: Path, tmp_path: Path, figures: Any) -> None:
    """N answered turns, one more in flight, SIGKILL: the journal rebuilds the N exactly as the live
    session served them; only the turn nobody got a reply for is missing."""
    figures.record(attack="SIGKILL of the proxy mid-episode (5 answered turns, 1 in flight)")
    p = start_proxy(tiny_model, tmp_path / "journal")
    try:
        token, base_url = p.open()
        client = openai.OpenAI(base_url=base_url + "/v1", api_key="x", max_retries=0, timeout=120)
        messages: list[dict[str, Any]] = [{"role": "user", "content": "hello"}]
        n = 5
        for k in range(n):
            reply = client.chat.completions.create(model="tiny", messages=messages, max_tokens=5)  # type: ignore[arg-type]
            messages += [
                {"role": "assistant", "content": reply.choices[0].message.content or ""},
                {"role": "user", "content": f"and then {k}?"},
            ]
        live = httpx.get(f"{p.admin}/sessions/{token}/sequences", headers=p.auth, timeout=30).json()
        in_flight = _raw_post(f"{base_url}/v1/chat/completions", {**LONG, "messages": messages})
        p.wait_generating(lambda: not _answered(in_flight))  # the 6th turn is generating
        p.proc.send_signal(signal.SIGKILL)
        p.proc.wait(30)
        in_flight.close()
    finally:
        _stop(p.proc)
    out = tmp_path / "rows.jsonl"
    result = subprocess.run(
        [*OPENENV, "journal", "rebuild", str(tmp_path / "journal"), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert [{k: v for k, v in r.items() if k != "journal"} for r in rows] == live["sequences"]
    assert live["stats"]["turns"] == n and "5 turns" in result.stderr and "not closed" in result.stderr
    figures.record(
        blocked=True,
        turns_answered=n,
        turns_rebuilt=live["stats"]["turns"],
        answered_turns_lost=0,
        turns_in_flight_lost=1,
    )


def test_sigterm_while_generating_ends_the_proxy_promptly(
    tiny_model: Path, tmp_path: Path, figures: Any
) -> None:
    figures.record(attack="SIGTERM while a turn generates")
    p = start_proxy(tiny_model, tmp_path / "journal", "--shutdown-timeout", "2")
    try:
        _, base_url = p.open()
        client = _raw_post(f"{base_url}/v1/chat/completions", LONG)
        p.wait_generating(lambda: not _answered(client))  # a turn is generating now, its client waiting
        t0 = time.monotonic()
        p.proc.send_signal(signal.SIGTERM)
        p.proc.wait(60)
        seconds = time.monotonic() - t0
        client.close()
    finally:
        _stop(p.proc)
    assert seconds < 2 + 8, f"SIGTERM took {seconds:.1f} s to end the proxy"
    figures.record(blocked=True, shutdown_timeout_s=2, seconds_to_exit=round(seconds, 2))


def _until(condition: Callable[[], bool], message: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(message)
        time.sleep(0.02)


def _raw_post(url: str, body: dict[str, Any]) -> socket.socket:
    """POST `body` on a socket of our own and return it unread: the test decides when the client leaves
    (close it), instead of a client timeout guessing when the generation runs."""
    parts = urlsplit(url)
    data = json.dumps(body).encode()
    sock = socket.create_connection((parts.hostname, parts.port), timeout=30)
    sock.sendall(
        f"POST {parts.path} HTTP/1.1\r\nHost: {parts.netloc}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(data)}\r\n\r\n".encode()
        + data
    )
    return sock


def _answered(sock: socket.socket) -> bool:
    """Whether any reply byte (or the close) has arrived on `sock`, without consuming it."""
    ready, _, _ = select.select([sock], [], [], 0)
    return bool(ready)
