"""`openenv view` against another local user and web pages (issue 30, finding 8), on a real socket.

The red-team read a `0600` trajectory through an unguarded viewer as a second local user, and the viewer
answered `Host: evil.example` (DNS rebinding). Now it sits behind the env server's checks (token, Host,
Origin; `openenv/viewer/guard.py`). The second user is a uid no account has, run with `setpriv`.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from openenv.export import read_episode
from openenv.server import LocalServer
from openenv.viewer import create_viewer_app, tokenizer_decode

FIXTURE = Path(__file__).parents[1] / "export" / "fixtures" / "pi-oracle.jsonl"
OTHER_UID = 62517


@pytest.fixture(scope="module")
def viewer(tiny_model: Path) -> Iterator[LocalServer]:
    log = read_episode(FIXTURE)
    with LocalServer(create_viewer_app(lambda: [log], tokenizer_decode(tiny_model))) as server:
        yield server


@pytest.mark.skipif(os.geteuid() != 0, reason="a second local user needs root to act as (setpriv)")
def test_another_local_user_gets_no_trajectory_from_the_viewer(viewer: LocalServer, figures) -> None:
    fetch = (
        f"import urllib.request, urllib.error\ntry: print(urllib.request.urlopen('{viewer.base_url}/api/episodes/0')"
        ".read()[:200])\nexcept urllib.error.HTTPError as e: print('HTTP', e.code)"
    )
    other = subprocess.run(
        [
            "setpriv",
            f"--reuid={OTHER_UID}",
            f"--regid={OTHER_UID}",
            "--clear-groups",
            sys.executable,
            "-I",
            "-c",
            fetch,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd="/",
    )
    figures.record(
        attack="another local user reads a trajectory through openenv view",
        attacker="local-user",
        blocked="HTTP 401" in other.stdout,
    )
    assert "HTTP 401" in other.stdout, other.stdout + other.stderr
    assert "pi-oracle" not in other.stdout


def test_a_page_and_a_rebound_name_are_refused_and_the_token_url_works(viewer: LocalServer, figures) -> None:
    security = viewer.headers
    rebound = httpx.get(f"{viewer.base_url}/", headers={**security, "Host": "evil.example"}, timeout=10)
    foreign = httpx.get(
        f"{viewer.base_url}/api/episodes/0", headers={**security, "Origin": "http://evil.example"}, timeout=10
    )
    wrong = httpx.get(f"{viewer.base_url}/?token=not-the-token", timeout=10)
    figures.record(
        attack="viewer with Host: evil.example, and from a page of evil.example",
        blocked=rebound.status_code == foreign.status_code == 403,
    )
    assert (rebound.status_code, foreign.status_code, wrong.status_code) == (403, 403, 401)
    assert "set-cookie" not in wrong.headers
    with httpx.Client(timeout=30) as browser:
        first = browser.get(f"{viewer.base_url}/?token={viewer.token}")  # the URL `openenv view` prints
        assert first.status_code == 200 and "HttpOnly" in first.headers["set-cookie"]
        assert "SameSite=Strict" in first.headers["set-cookie"]
        assert browser.get(f"{viewer.base_url}/api/episodes/0").json()["name"]  # the cookie carries on
