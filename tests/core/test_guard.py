"""No process outlives a failed pytest session: a session that starts a server (as tests/conftest.py
starts vLLM) and then fails, times out (pytest-timeout's `os._exit`) or is SIGKILLed leaves nothing behind.

Each case runs a real, tiny pytest session in a subprocess. Its session fixture starts `VLLMServer` with
a stand-in command (an HTTP server answering /health that starts a grandchild, like vLLM's engine process);
the session writes their pids, then fails. The test then checks that both are gone.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from openenv.core.guard import die_with_parent, guarded

CONFTEST = r'''
import sys
import pytest
from openenv.soak.vllm_server import VLLMServer

FAKE = """
import http.server, json, os, subprocess, sys
grand = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
with open(os.environ["PIDS_FILE"], "w") as fh:
    json.dump({"server": os.getpid(), "grandchild": grand.pid}, fh)
class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Health).serve_forever()
"""


class StandInVLLM(VLLMServer):
    def command(self):
        return [sys.executable, "-c", FAKE, str(self.port)]


@pytest.fixture(scope="session")
def server():
    started = StandInVLLM("no-model").start(timeout=60)
    yield started
    started.stop()
'''

TEST = r"""
import os, signal, time

def test_that_fails(server):
    how = os.environ["HOW"]
    if how == "timeout":
        time.sleep(120)  # pytest-timeout ends the session with os._exit: no teardown, no atexit
    if how == "sigkill":
        os.kill(os.getpid(), signal.SIGKILL)
    assert False, "a failing test"
"""


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.mark.parametrize("how", ["fail", "timeout", "sigkill"])
def test_a_failed_pytest_session_leaves_no_server_running(tmp_path: Path, how: str) -> None:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_inner.py").write_text(TEST)
    (tmp_path / "pytest.ini").write_text("[pytest]\ntimeout = 3\ntimeout_method = thread\n")
    pids_file = tmp_path / "pids.json"
    # Only the plugin the session needs (pytest-timeout): the suite's others take seconds to import.
    env = {**os.environ, "HOW": how, "PIDS_FILE": str(pids_file), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    env.pop("OPENENV_VLLM_URL", None)
    inner = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "pytest_timeout",
            str(tmp_path),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert pids_file.is_file(), inner.stdout + inner.stderr
    pids = json.loads(pids_file.read_text())
    try:
        assert inner.returncode != 0
        if how == "sigkill":
            assert inner.returncode == -signal.SIGKILL
        deadline = time.monotonic() + 20
        while any(map(_alive, pids.values())) and time.monotonic() < deadline:
            time.sleep(0.2)
        left = {name: pid for name, pid in pids.items() if _alive(pid)}
        assert left == {}, f"outlived the {how} session: {left}\n{inner.stdout[-2000:]}"
    finally:
        for pid in pids.values():  # never leave them behind, even when the test fails
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


LEAKY = r"""
import json, os, subprocess, sys

def test_that_leaves_a_server_behind_and_fails():
    server = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    with open(os.environ["PIDS_FILE"], "w") as fh:
        json.dump({"leftover": server.pid}, fh)
    assert False, "a failing test that never stops what it started"
"""


def test_a_child_a_failed_test_left_running_is_stopped_at_the_end_of_the_session(tmp_path: Path) -> None:
    (tmp_path / "test_leaky.py").write_text(LEAKY)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    pids_file = tmp_path / "pids.json"
    env = {**os.environ, "PIDS_FILE": str(pids_file), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    inner = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "openenv.testing.leftovers",
            str(tmp_path),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    pid = json.loads(pids_file.read_text())["leftover"]
    try:
        assert inner.returncode == 1
        assert "stopped 1 process(es) the session left running" in inner.stderr
        deadline = time.monotonic() + 10
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(pid)
    finally:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_the_guard_outlives_a_worker_thread_that_started_it(tmp_path: Path) -> None:
    """The kernel's parent-death signal fires when the parent *thread* exits; a server started from a
    worker thread must not stop with that thread, only with the process."""
    import threading

    started: list[subprocess.Popen[bytes]] = []

    def start() -> None:
        started.append(
            subprocess.Popen(
                guarded([sys.executable, "-c", "import time; time.sleep(60)"]), start_new_session=True
            )
        )

    worker = threading.Thread(target=start)
    worker.start()
    worker.join()
    [proc] = started
    try:
        time.sleep(1.5)
        assert proc.poll() is None
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


def test_die_with_parent_is_available_on_linux() -> None:
    assert die_with_parent(signal.SIGUSR2) is sys.platform.startswith("linux")
    die_with_parent(0)  # and turned off again for this test process
