"""Attacks and faults on a real `openenv proxy` process: one client must not stall the others, a client
that leaves must not keep a core busy, SIGTERM ends the process, and SIGKILL loses no answered turn.

Each test is the attack itself against the standalone proxy as users run it (a subprocess on the tiny
model, local backend unless it says vLLM), and records its figure for docs/benchmarks.md.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import openai
import psutil
import pytest

from openenv.capture.routes.model import REJOIN_GRACE_S
from openenv.core.net import free_port

pytestmark = pytest.mark.slow

OPENENV = [sys.executable, "-m", "openenv.cli.main"]
LONG = {"model": "tiny", "max_tokens": 4000, "temperature": 1.0, "seed": 0,
        "messages": [{"role": "user", "content": "write a very long story"}]}


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


def start_proxy(tiny_model: Path, journal: Path, *extra: str) -> Proxy:
    """`openenv proxy` with its defaults (generated admin key, admin port of its own, fsynced journal)."""
    cmd = [*OPENENV, "proxy", "--model", str(tiny_model), "--port", str(free_port()), "--journal-dir", str(journal),
           *extra]
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
        time.sleep(0.3)
        result = attack()
        time.sleep(0.3)
    finally:
        stop.set()
        prober.join(60)
    return result, latencies


def test_a_40_mib_body_is_refused_without_stalling_other_clients(proxy: Proxy, figures: Any) -> None:
    figures.record(attack="40 MiB body (declared and chunked) + a 4 MiB body, /v1/models probed meanwhile")
    token, base_url = proxy.open()
    models = f"{base_url}/v1/models"
    huge = b'{"model":"tiny","max_tokens":1,"messages":[{"role":"user","content":"' + b"a" * (40 << 20) + b'"}]}'

    def send_huge() -> list[httpx.Response]:
        with httpx.Client(timeout=120) as http:
            declared = http.post(f"{base_url}/v1/chat/completions", content=huge,
                                 headers={"content-type": "application/json"})
            chunked = http.post(f"{base_url}/v1/messages", content=iter([huge[i:i + (1 << 20)]
                                                                         for i in range(0, len(huge), 1 << 20)]),
                                headers={"content-type": "application/json", "x-api-key": token})
        return [declared, chunked]

    (declared, chunked), latencies = _while_probing(models, send_huge)
    assert declared.status_code == 413 and declared.json()["error"]["code"] == "request_too_large"  # OpenAI's shape
    assert chunked.status_code == 413 and chunked.json()["error"]["type"] == "request_too_large"  # Anthropic's
    p99_ms, worst_ms = 1000 * _p99(latencies), 1000 * max(latencies)
    # The probe is sequential: a stalled loop shows as one huge sample (43.6 s before the fix), so the
    # assertion is on the worst probe, far above the <100 ms goal and far below a stall.
    assert len(latencies) >= 5 and worst_ms < 1000, f"/v1/models took {worst_ms:.0f} ms while a 40 MiB body was refused"

    # Under the cap but big (4 MiB of text to parse, render and tokenize): on a worker thread, not the loop.
    big = {"model": "tiny", "max_tokens": 1, "messages": [{"role": "user", "content": "word " * (800 << 10)}]}
    n_tokens, big_latencies = _while_probing(models, lambda: httpx.post(
        f"{base_url}/v1/messages/count_tokens", json=big, headers={"x-api-key": token}, timeout=300))
    assert n_tokens.status_code == 200 and n_tokens.json()["input_tokens"] > 800_000
    # Recorded, not asserted: the worker thread still takes the GIL in long C calls (the tokenizer), so
    # this figure follows the machine's load (30-650 ms measured); on the event loop it was the whole job.
    big_worst_ms = 1000 * max(big_latencies)
    figures.record(blocked=True, body_mib=40, models_p99_ms=round(p99_ms, 1), models_max_ms=round(worst_ms, 1),
                   models_probes=len(latencies), models_p99_ms_while_4mib_tokenized=round(1000 * _p99(big_latencies), 1),
                   models_max_ms_while_4mib_tokenized=round(big_worst_ms, 1))


def test_a_client_that_disconnects_mid_generation_stops_it(proxy: Proxy, figures: Any) -> None:
    figures.record(attack="client disconnects mid-generation (4000-token request)")
    _, base_url = proxy.open()

    def leave_after(seconds: float) -> None:
        with pytest.raises(httpx.TimeoutException):  # the client gives up and closes its connection
            httpx.post(f"{base_url}/v1/chat/completions", json=LONG, timeout=seconds)

    client = threading.Thread(target=leave_after, args=(3.0,))
    client.start()
    time.sleep(1.0)
    generating = proxy.cores_busy(1.5)  # the generation is running (else this test could not fail)
    client.join(30)
    # The proxy keeps a disconnected request's generation for REJOIN_GRACE_S so that an SDK's resend can
    # join it; after that it must stop.
    time.sleep(REJOIN_GRACE_S + 2.0)
    after = proxy.cores_busy(1.0)
    # An idle proxy uses ~0; generating, it takes what the (shared, loaded) machine gives it.
    assert generating > 0.1, f"the generation was not running before the disconnect ({generating:.2f} cores)"
    assert after < min(0.05, generating / 5), f"{after:.2f} cores {REJOIN_GRACE_S + 2:.0f} s after the only client left"
    figures.record(blocked=True, cores_while_generating=round(generating, 2), cores_after_grace=round(after, 3))


def test_a_body_nested_50000_deep_gets_a_generic_error_in_the_dialect(proxy: Proxy, figures: Any) -> None:
    figures.record(attack="JSON body nested 50,000 deep (OpenAI and Anthropic routes)")
    token, base_url = proxy.open()
    nested = b"[" * 50_000 + b"]" * 50_000
    body = b'{"model":"tiny","max_tokens":4,"messages":[{"role":"user","content":' + nested + b"}]}"
    with httpx.Client(timeout=60) as http:
        for route, headers in (("/v1/chat/completions", {}), ("/v1/messages", {"x-api-key": token})):
            reply = http.post(base_url + route, content=body, headers={"content-type": "application/json", **headers})
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
            messages += [{"role": "assistant", "content": reply.choices[0].message.content or ""},
                         {"role": "user", "content": f"and then {k}?"}]
        live = httpx.get(f"{p.admin}/sessions/{token}/sequences", headers=p.auth, timeout=30).json()
        in_flight = threading.Thread(target=lambda: _swallow(lambda: httpx.post(
            f"{base_url}/v1/chat/completions", json={**LONG, "messages": messages}, timeout=60)))
        in_flight.start()
        time.sleep(1.0)  # the 6th turn is generating
        p.proc.send_signal(signal.SIGKILL)
        p.proc.wait(30)
        in_flight.join(60)
    finally:
        _stop(p.proc)
    out = tmp_path / "rows.jsonl"
    result = subprocess.run([*OPENENV, "journal", "rebuild", str(tmp_path / "journal"), "--out", str(out)],
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert [{k: v for k, v in r.items() if k != "journal"} for r in rows] == live["sequences"]
    assert live["stats"]["turns"] == n and "5 turns" in result.stderr and "not closed" in result.stderr
    figures.record(blocked=True, turns_answered=n, turns_rebuilt=live["stats"]["turns"], answered_turns_lost=0,
                   turns_in_flight_lost=1)


def test_sigterm_while_generating_ends_the_proxy_promptly(tiny_model: Path, tmp_path: Path, figures: Any) -> None:
    figures.record(attack="SIGTERM while a turn generates")
    p = start_proxy(tiny_model, tmp_path / "journal", "--shutdown-timeout", "2")
    try:
        _, base_url = p.open()
        client = threading.Thread(target=lambda: _swallow(lambda: httpx.post(
            f"{base_url}/v1/chat/completions", json=LONG, timeout=120)))
        client.start()
        time.sleep(1.5)
        assert p.cores_busy(0.5) > 0.1, "the generation was not running"
        t0 = time.monotonic()
        p.proc.send_signal(signal.SIGTERM)
        p.proc.wait(60)
        seconds = time.monotonic() - t0
        client.join(60)
    finally:
        _stop(p.proc)
    assert seconds < 2 + 8, f"SIGTERM took {seconds:.1f} s to end the proxy"
    figures.record(blocked=True, shutdown_timeout_s=2, seconds_to_exit=round(seconds, 2))


def _swallow(call: Callable[[], Any]) -> None:
    try:
        call()
    except httpx.HTTPError:
        pass
