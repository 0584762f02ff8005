"""`LedgerRelay` on its own: it passes requests through, keeps an honest ledger per session, and plays a
client retry that must be answered with the same bytes.

The proxy behind it is a small Starlette app on a real loopback socket; the client is httpx.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from openenv.core.net import free_port
from openenv.server import LocalServer
from openenv.soak.relay import RETRY_HEADER, LedgerRelay

BODY = b'{"model": "tiny", "messages": []}'


class StandInProxy:
    """`/s/<token>/same` echoes the body (a faithful replay), `/count` answers a new number each time (an
    unfaithful one), `/deny` is a 401, `/slow` a 401 a second later, and a GET is a model probe. It keeps the retry header of each POST."""

    def __init__(self) -> None:
        self.retry_headers: list[str | None] = []
        self._numbers = itertools.count()
        app = Starlette(routes=[Route("/s/{token}/{what}", self._answer, methods=["GET", "POST"])])
        self.server = LocalServer(app)

    async def _answer(self, request: Request) -> Response:
        if request.method == "GET":
            return JSONResponse({"models": ["tiny"]})
        self.retry_headers.append(request.headers.get(RETRY_HEADER))
        match request.path_params["what"]:
            case "same":
                return Response(await request.body(), media_type="application/json")
            case "count":
                return JSONResponse({"n": next(self._numbers)})
            case "slow":  # a session closing under a request still on its way
                await asyncio.sleep(1.0)
                return JSONResponse({"error": "unknown session"}, status_code=401)
            case _:
                return JSONResponse({"error": "unknown session"}, status_code=401)


@pytest.fixture
def proxy() -> Iterator[StandInProxy]:
    stand_in = StandInProxy()
    with stand_in.server:
        yield stand_in


@pytest.fixture
def relay(proxy: StandInProxy) -> Iterator[LedgerRelay]:
    with LedgerRelay(proxy.server.port, replay_timeout_s=5) as running:
        yield running


def post(relay: LedgerRelay, path: str) -> httpx.Response:
    return httpx.post(
        relay.url + path, content=BODY, headers={"content-type": "application/json"}, timeout=10
    )


def test_replies_pass_through_and_each_session_counts_its_posts_and_statuses(relay: LedgerRelay) -> None:
    assert post(relay, "/s/a/same").content == BODY
    assert post(relay, "/s/a/deny").status_code == 401
    assert post(relay, "/s/b/count").json() == {"n": 0}
    assert httpx.get(relay.url + "/s/a/models", timeout=10).json() == {
        "models": ["tiny"]
    }  # a probe: not counted
    a, b = relay.ledger("a"), relay.ledger("b")
    assert (a.posts, dict(a.statuses), a.relay_errors) == (2, {200: 1, 401: 1}, 0)
    assert (b.posts, dict(b.statuses)) == (1, {200: 1})
    assert relay.ledger("never-seen").posts == 0


def test_an_armed_session_sends_its_next_answered_request_again_with_the_retry_header(
    relay: LedgerRelay, proxy: StandInProxy
) -> None:
    relay.replay_next("a")
    assert post(relay, "/s/a/same").content == BODY  # the harness gets the original reply
    assert proxy.retry_headers == [None, "1"]
    ledger = relay.ledger("a")
    assert (ledger.posts, ledger.replays_sent, ledger.replays_identical, ledger.replay_problems) == (
        1,
        1,
        1,
        [],
    )
    assert relay.disarm("a") is False, "the retry fired once and is spent"
    post(relay, "/s/a/same")
    assert proxy.retry_headers == [None, "1", None]


def test_a_retry_answered_with_other_bytes_is_a_problem(relay: LedgerRelay) -> None:
    relay.replay_next("a")
    assert post(relay, "/s/a/count").json() == {"n": 0}
    ledger = relay.ledger("a")
    assert (ledger.replays_sent, ledger.replays_identical) == (1, 0)
    assert ledger.replay_problems == ["the retry got different bytes than the original reply"]


def test_an_armed_retry_waits_for_an_answered_request(relay: LedgerRelay, proxy: StandInProxy) -> None:
    relay.replay_next("a")
    post(relay, "/s/a/deny")
    assert proxy.retry_headers == [None] and relay.ledger("a").replays_sent == 0
    assert relay.disarm("a") is True, "a retry that never fired is reported, not forgotten"


def test_an_unreachable_proxy_is_a_502_counted_as_a_relay_error() -> None:
    with LedgerRelay(free_port()) as relay:
        reply = post(relay, "/s/a/same")
        assert reply.status_code == 502 and "unreachable" in reply.text
        ledger = relay.ledger("a")
        assert (ledger.posts, ledger.relay_errors, dict(ledger.statuses)) == (1, 1, {502: 1})


def test_stop_frees_the_port() -> None:
    relay = LedgerRelay(free_port()).start()
    url = relay.url
    relay.stop()
    with pytest.raises(httpx.ConnectError):
        httpx.get(url + "/s/a/models", timeout=5)


def test_a_settled_ledger_waits_for_the_answer_of_a_request_still_in_flight(relay: LedgerRelay) -> None:
    """Counted on arrival but answered later: read too early, the request would look lost."""
    with ThreadPoolExecutor(1) as pool:
        reply = pool.submit(post, relay, "/s/a/slow")
        while relay.ledger("a").posts == 0:
            time.sleep(0.01)
        assert relay.ledger("a").in_flight == 1
        ledger = relay.settled_ledger("a", wait_s=10)
        assert (ledger.in_flight, dict(ledger.statuses)) == (0, {401: 1})
        assert reply.result().status_code == 401
