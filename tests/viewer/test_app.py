"""The viewer in a real headless Chromium (Debian's chromium + chromium-driver, via selenium; the
session's `browser` fixture in tests/conftest.py).

Needs `scripts/install_browser.sh`; skipped with that hint when the browser is missing. The screenshot
goes to artifacts/viewer/ (ignored by git) for a human to look at.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from openenv.core.net import free_port
from openenv.export.log import read_episode
from openenv.server import LocalServer
from openenv.viewer import create_viewer_app, load_proxy_session, tokenizer_decode

FIXTURE = Path(__file__).parents[1] / "export" / "fixtures" / "pi-oracle.jsonl"
ARTIFACTS = Path(__file__).parents[2] / "artifacts" / "viewer"


@pytest.fixture(scope="module")
def viewer(tiny_model: Path) -> Iterator[LocalServer]:
    log = read_episode(FIXTURE)
    server = LocalServer(create_viewer_app(lambda: [log], tokenizer_decode(tiny_model))).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def viewer_url(viewer: LocalServer) -> str:
    return viewer.base_url


def test_page_shows_turns_messages_tool_calls_tokens_reward_and_sequences(browser, viewer, viewer_url):
    from selenium.webdriver.common.by import By

    browser.get(f"{viewer_url}/?token={viewer.token}")  # as the printed URL: the token once, then a cookie
    text = browser.find_element(By.TAG_NAME, "body").text
    log = read_episode(FIXTURE)
    assert "pi-oracle" in browser.find_element(By.TAG_NAME, "h1").text
    assert browser.find_element(By.ID, "reward").text == "1.0"
    breakdown = browser.find_element(By.ID, "reward-breakdown").text
    assert "tests_passed 3.0" in breakdown and "solved 1.0" in breakdown
    assert browser.find_element(By.ID, "merge-ratio").text == "1.00"
    assert browser.find_element(By.ID, "breaks").text == "0 break(s)"
    trained = sum(log.sequences[0].env_mask)
    assert browser.find_element(By.ID, "trained-ratio").text == f"{trained} / {trained} = 1.00"
    [root] = browser.find_elements(By.CSS_SELECTOR, "#lineage li")
    assert root.get_attribute("data-origin") == "new" and "sequence 0" in root.text
    turns = browser.find_elements(By.CSS_SELECTOR, "#turns .turn")
    assert len(turns) == 2 and "merged" in turns[1].text
    assert "tool call bash(" in turns[0].text and "cat > units.py" in turns[0].text
    assert "tool result" in turns[1].text and "I applied the fix and the task is done." in turns[1].text
    assert "The conversions in `units.py` give wrong answers" in text  # the task instruction (user message)
    model = browser.find_elements(By.CSS_SELECTOR, "#sequence-0 .tok.model")
    env = browser.find_elements(By.CSS_SELECTOR, "#sequence-0 .tok.env")
    row = log.sequences[0]
    assert (len(model), len(env)) == (sum(row.env_mask), row.env_mask.count(0))
    assert model[0].get_attribute("title") == f"logprob {row.logprobs[0]:.3f}"
    assert model[0].value_of_css_property("background-color") not in ("rgba(0, 0, 0, 0)", "transparent")
    assert env[0].get_attribute("title") == "env_mask 0"
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    height = browser.execute_script("return document.body.scrollHeight")
    browser.set_window_size(1400, min(int(height) + 100, 6000))
    assert browser.save_screenshot(str(ARTIFACTS / "episode.png"))


def test_episode_json_and_unknown_episode(viewer, viewer_url):
    view = httpx.get(f"{viewer_url}/api/episodes/0", headers=viewer.headers, timeout=30).json()
    assert view["harness"] == "pi" and len(view["turns"]) == 2
    missing = httpx.get(f"{viewer_url}/episodes/7", headers=viewer.headers, timeout=30)
    assert missing.status_code == 404 and "there are 1" in missing.text


def test_a_live_capture_session_is_viewed_through_the_proxy_admin_api(tiny_model):
    """A real capture proxy (tiny model, in-process backend) answers one OpenAI SDK request; the viewer
    reads that session through `--proxy` (the admin API) and shows its turn and sequence."""
    from openai import OpenAI

    from openenv.capture.backends.local import LocalBackend
    from openenv.capture.canonical import SamplingParams
    from openenv.capture.server import CaptureServer

    with CaptureServer(backend=LocalBackend(tiny_model), model=tiny_model) as proxy:
        session = proxy.open_session(mode="auto", sampling=SamplingParams(max_tokens=8, temperature=0.0))
        client = OpenAI(base_url=session.base_url + "/v1", api_key=session.token)
        client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "hello"}])
        log = load_proxy_session(proxy.base_url, session.token)
        with LocalServer(create_viewer_app(lambda: [log], tokenizer_decode(tiny_model))) as server:
            view = httpx.get(f"{server.base_url}/api/episodes/0", headers=server.headers, timeout=30).json()
    assert len(view["turns"]) == 1 and view["turns"][0]["source"] == "sample"
    [seq] = view["sequences"]
    assert seq["model_tokens"] == view["turns"][0]["completion_tokens"] > 0
    assert view["reward"] is None  # a live session has no verifier result


def test_a_protected_proxy_is_read_with_its_admin_key(tiny_model):
    """A proxy started with an admin key refuses the viewer without it (401) and serves it with it."""
    from openenv.capture.backends.local import LocalBackend
    from openenv.capture.server import CaptureServer
    from openenv.errors import TransportError

    with CaptureServer(backend=LocalBackend(tiny_model), model=tiny_model, admin_key="sesame") as proxy:
        session = proxy.open_session(mode="auto")
        with pytest.raises(TransportError, match="401"):
            load_proxy_session(proxy.base_url, session.token)
        log = load_proxy_session(proxy.base_url, session.token, admin_key="sesame")
    assert log.turns == [] and log.sequences == []


def test_an_unreachable_proxy_is_a_transport_error_naming_the_url():
    from openenv.errors import TransportError

    port = free_port()
    with pytest.raises(TransportError, match=f"127.0.0.1:{port}/sessions/tok/trajectory"):
        load_proxy_session(f"http://127.0.0.1:{port}", "tok")
