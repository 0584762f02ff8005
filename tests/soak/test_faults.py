"""`FaultProxy` on its own: it forwards faithfully, breaks exactly as told, and streams unbuffered.

The upstream is a real `http.server` on loopback; the client is httpx, as in `VLLMBackend`.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import httpx
import pytest

from openenv.core.net import free_port
from openenv.core.polling import settle
from openenv.soak.faults import FaultProxy


class _Upstream(BaseHTTPRequestHandler):
    """Echoes POST bodies; GET sends two chunks (chunked), the second once `go_on` is set (or after 30 s)."""

    protocol_version = "HTTP/1.1"
    seen: ClassVar[list[str]] = []
    go_on: ClassVar[threading.Event] = threading.Event()
    second_sent: ClassVar[threading.Event] = threading.Event()

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.seen.append(self.path)
        reply = json.dumps(
            {"path": self.path, "echo": json.loads(body), "host": self.headers["Host"]}
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def do_GET(self) -> None:
        self.seen.append(self.path)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for i, part in enumerate((b"data: one\n\n", b"data: two\n\n")):
            if i == 1:
                self.go_on.wait(30)
                self.second_sent.set()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def upstream() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", free_port()), _Upstream)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def faults(upstream: str) -> Iterator[FaultProxy]:
    _Upstream.seen.clear()
    with FaultProxy(upstream) as proxy:
        yield proxy


def _post(proxy: FaultProxy, n: int = 0, timeout: float = 5.0) -> httpx.Response:
    return httpx.post(f"{proxy.url}/v1/completions", json={"n": n}, timeout=timeout)


def test_pass_forwards_path_body_and_reply_and_points_host_upstream(
    faults: FaultProxy, upstream: str
) -> None:
    with httpx.Client(timeout=5) as client:  # a pooled client: each request still gets its own connection
        replies = [client.post(f"{faults.url}/v1/completions?x=1", json={"n": i}) for i in range(3)]
    assert [r.json()["echo"] for r in replies] == [{"n": 0}, {"n": 1}, {"n": 2}]
    assert replies[0].json()["path"] == "/v1/completions?x=1"
    assert replies[0].json()["host"] == upstream.removeprefix("http://")
    assert replies[0].headers["connection"] == "close"
    assert faults.stats == {
        "requests": 3,
        "pass": 3,
        "down": 0,
        "slow": 0,
        "hold": 0,
        "error": 0,
        "dropped": 0,
    }


def test_down_resets_the_next_n_connections_without_a_reply_then_passes(faults: FaultProxy) -> None:
    faults.set("down", count=2)
    for _ in range(2):
        with pytest.raises(httpx.TransportError):
            _post(faults)
    assert _post(faults).status_code == 200
    assert _Upstream.seen == ["/v1/completions"]  # the dropped requests never reached the backend
    assert faults.stats == {
        "requests": 3,
        "pass": 1,
        "down": 2,
        "slow": 0,
        "hold": 0,
        "error": 0,
        "dropped": 0,
    }


def test_error_replies_the_status_with_a_json_body_until_set_again(faults: FaultProxy) -> None:
    faults.set("error", status=503)
    replies = [_post(faults) for _ in range(3)]
    assert {r.status_code for r in replies} == {503}
    assert replies[0].json()["error"]["code"] == 503
    faults.set("pass")
    assert _post(faults).status_code == 200
    assert faults.stats["error"] == 3 and _Upstream.seen == ["/v1/completions"]


def test_slow_past_the_client_timeout_is_a_timeout_and_never_reaches_the_backend(faults: FaultProxy) -> None:
    faults.set("slow", count=1, delay_s=2.0)
    with pytest.raises(httpx.ReadTimeout):
        _post(faults, timeout=0.4)
    # the proxy saw the client leave and dropped the request (without it, it is forwarded after 2 s)
    assert settle(lambda: faults.stats["dropped"], lambda n: n == 1, wait_s=30) == 1
    assert _Upstream.seen == []
    assert _post(faults).status_code == 200


def test_hold_keeps_the_request_from_the_backend_until_released(faults: FaultProxy) -> None:
    faults.set("hold", count=1)
    with httpx.Client(timeout=30) as client, ThreadPoolExecutor(1) as pool:
        reply = pool.submit(client.post, f"{faults.url}/v1/completions", json={"n": 7})
        assert faults.held(timeout=30)
        assert _Upstream.seen == [] and not reply.done()  # held: the backend has not seen it
        faults.release()
        assert reply.result(30).json()["echo"] == {"n": 7}
    assert _Upstream.seen == ["/v1/completions"] and faults.stats["hold"] == 1
    assert _post(faults).status_code == 200  # count=1: the next request passes


def test_a_held_request_outlasts_any_client_timeout_and_a_new_set_does_not_release_it(
    faults: FaultProxy,
) -> None:
    faults.set("hold")
    with pytest.raises(httpx.ReadTimeout):
        _post(faults, timeout=0.4)  # held until released, and it is not: the timeout must fire
    assert faults.held(timeout=30)
    assert (
        settle(lambda: faults.stats["dropped"], lambda n: n == 1, wait_s=30) == 1
    )  # it saw the client leave
    faults.set("pass")
    assert _post(faults).status_code == 200
    assert _Upstream.seen == ["/v1/completions"]  # only the request after the held one


def test_slow_within_the_client_timeout_answers_late(faults: FaultProxy) -> None:
    faults.set("slow", count=1, delay_s=0.5)
    start = time.monotonic()
    assert _post(faults).json()["echo"] == {"n": 0}
    assert time.monotonic() - start >= 0.5
    assert faults.stats["slow"] == 1


def test_streams_pass_through_unbuffered(faults: FaultProxy) -> None:
    """The upstream sends its second event only when the test has read the first (or after 30 s): a proxy
    that buffered would deliver the first only after the second was sent."""
    _Upstream.go_on.clear()
    _Upstream.second_sent.clear()
    arrivals: list[tuple[str, bool]] = []  # (line, whether the upstream had sent the second event by then)
    with httpx.stream("GET", f"{faults.url}/stream", timeout=60) as response:
        for line in response.iter_lines():
            if line:
                arrivals.append((line, _Upstream.second_sent.is_set()))
                _Upstream.go_on.set()
    assert arrivals == [("data: one", False), ("data: two", True)]


def test_set_from_another_thread_faults_exactly_count_requests(faults: FaultProxy) -> None:
    faults.set("error", count=5, status=500)
    codes: list[int] = []
    lock = threading.Lock()

    def hammer() -> None:
        for _ in range(5):
            code = _post(faults).status_code
            with lock:
                codes.append(code)

    threads = [threading.Thread(target=hammer) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(codes).count(500) == 5 and codes.count(200) == 15
    assert faults.stats == {
        "requests": 20,
        "pass": 15,
        "down": 0,
        "slow": 0,
        "hold": 0,
        "error": 5,
        "dropped": 0,
    }


def test_a_dead_upstream_looks_down_and_bad_arguments_are_refused() -> None:
    with FaultProxy(f"http://127.0.0.1:{free_port()}") as proxy:
        with pytest.raises(httpx.TransportError):
            _post(proxy)
        with pytest.raises(ValueError, match="mode must be one of"):
            proxy.set("flaky")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="plain http"):
        FaultProxy("https://example.invalid")
