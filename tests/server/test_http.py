"""Stateful HTTP: reset opens a session, step/state/close name it, and every failure is typed JSON."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from echo_env import EchoAction, EchoEnvironment, EchoObservation

SID = "X-Session-Id"
Serve = Callable[..., str]


class FailingEnv(EchoEnvironment):
    """Echo whose step raises, like a buggy env."""

    def step(self, action: EchoAction) -> EchoObservation:
        raise RuntimeError(f"cannot handle {action.message!r}")


def reset(http: httpx.Client, url: str, **body: object) -> httpx.Response:
    return http.post(f"{url}/reset", json=body)


def test_reset_returns_a_session_id_in_body_and_header(http: httpx.Client, echo_url: str) -> None:
    r = reset(http, echo_url)
    assert r.status_code == 200
    assert r.json()["session_id"] == r.headers[SID]
    assert r.json() == {  # the reference's shape, plus ours only: the session id
        "observation": {"metadata": {}, "echoed_message": "", "message_length": 0},
        "reward": None,
        "done": False,
        "session_id": r.headers[SID],
    }


def test_steps_accumulate_in_the_named_session(http: httpx.Client, echo_url: str) -> None:
    sid = reset(http, echo_url, episode_id="ep-1").json()["session_id"]
    for _ in range(3):
        r = http.post(f"{echo_url}/step", json={"action": {"message": "hey"}}, headers={SID: sid})
        assert r.status_code == 200
    assert r.json()["observation"]["echoed_message"] == "hey"
    assert r.json()["reward"] == pytest.approx(0.3)
    state = http.get(f"{echo_url}/state", headers={SID: sid}).json()
    assert state == {"episode_id": "ep-1", "step_count": 3, "max_steps": None}


def test_session_id_may_travel_in_the_body_or_query(http: httpx.Client, echo_url: str) -> None:
    sid = reset(http, echo_url).json()["session_id"]
    assert (
        http.post(f"{echo_url}/step", json={"action": {"message": "a"}, "session_id": sid}).status_code == 200
    )
    assert http.get(f"{echo_url}/state", params={"session_id": sid}).json()["step_count"] == 1


def test_two_sessions_do_not_share_state(http: httpx.Client, echo_url: str) -> None:
    a, b = (reset(http, echo_url).json()["session_id"] for _ in range(2))
    http.post(f"{echo_url}/step", json={"action": {"message": "only a"}}, headers={SID: a})
    assert http.get(f"{echo_url}/state", headers={SID: a}).json()["step_count"] == 1
    assert http.get(f"{echo_url}/state", headers={SID: b}).json()["step_count"] == 0


def test_reset_with_a_session_id_restarts_that_session(http: httpx.Client, echo_url: str) -> None:
    sid = reset(http, echo_url).json()["session_id"]
    http.post(f"{echo_url}/step", json={"action": {"message": "a"}}, headers={SID: sid})
    again = http.post(f"{echo_url}/reset", json={"episode_id": "second"}, headers={SID: sid})
    assert again.json()["session_id"] == sid
    assert http.get(f"{echo_url}/state", headers={SID: sid}).json()["step_count"] == 0
    assert http.get(f"{echo_url}/health").json()["active_sessions"] == 1


def test_step_without_a_session_is_unknown_session(http: httpx.Client, echo_url: str) -> None:
    r = http.post(f"{echo_url}/step", json={"action": {"message": "a"}})
    assert r.status_code == 401
    assert r.json()["error"]["code"] == "unknown_session"
    assert "X-Session-Id" in r.json()["error"]["message"]


def test_invalid_action_is_400_naming_the_field(http: httpx.Client, echo_url: str) -> None:
    sid = reset(http, echo_url).json()["session_id"]
    r = http.post(f"{echo_url}/step", json={"action": {"mesage": "typo"}}, headers={SID: sid})
    assert r.status_code == 400
    error = r.json()["error"]
    assert error["code"] == "invalid_action"
    assert "action field 'mesage': Extra inputs are not permitted" in error["message"]
    assert "action field 'message': Field required" in error["message"]


def test_malformed_json_body_is_400_malformed_json(http: httpx.Client, echo_url: str) -> None:
    r = http.post(f"{echo_url}/step", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 400
    assert r.json()["error"]["code"] == "malformed_json"


def test_a_step_body_without_action_is_bad_request_naming_it(http: httpx.Client, echo_url: str) -> None:
    sid = reset(http, echo_url).json()["session_id"]
    r = http.post(f"{echo_url}/step", json={"acton": {}}, headers={SID: sid})
    assert r.status_code == 400
    assert r.json()["error"]["code"] == "bad_request"
    assert "request field 'action': Field required" in r.json()["error"]["message"]
    assert "request field 'acton': Extra inputs are not permitted" in r.json()["error"]["message"]


def test_unknown_reset_option_is_bad_request_not_a_500(http: httpx.Client, echo_url: str) -> None:
    r = reset(http, echo_url, options={"difficulty": "hard"})
    assert r.status_code == 400
    assert "max_steps" in r.json()["error"]["message"]
    assert http.get(f"{echo_url}/health").json()["active_sessions"] == 0


def test_an_env_exception_is_env_error_and_the_server_lives_on(http: httpx.Client, serve: Serve) -> None:
    url = serve(FailingEnv)
    sid = reset(http, url).json()["session_id"]
    r = http.post(f"{url}/step", json={"action": {"message": "boom"}}, headers={SID: sid})
    assert r.status_code == 500
    assert r.json()["error"]["code"] == "env_error"
    assert "RuntimeError: cannot handle 'boom'" in r.json()["error"]["message"]
    assert http.get(f"{url}/health").status_code == 200


def test_delete_session_frees_its_slot(http: httpx.Client, serve: Serve) -> None:
    url = serve(max_sessions=1)
    sid = reset(http, url).json()["session_id"]
    full = reset(http, url)
    assert full.status_code == 503
    assert full.json()["error"] == {
        "code": "capacity",
        "message": "server is at capacity: 1 of 1 sessions are live; close a session or raise max_sessions",
        "details": {"active": 1, "maximum": 1},
    }
    assert http.delete(f"{url}/session", headers={SID: sid}).status_code == 204
    assert reset(http, url).status_code == 200
    assert http.get(f"{url}/state", headers={SID: sid}).json()["error"]["code"] == "unknown_session"


def test_step_keeps_its_openapi_body_and_reply(http: httpx.Client, echo_url: str) -> None:
    """/step skips FastAPI's parameter solving (a `BareRoute`) but is documented like any other route."""
    step = http.get(f"{echo_url}/openapi.json").json()["paths"]["/step"]["post"]
    assert step["requestBody"]["required"] is True
    assert "application/json" in step["requestBody"]["content"]
    assert "application/json" in step["responses"]["200"]["content"]
