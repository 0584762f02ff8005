"""LocalSandbox: limits, status reporting, output capture, and no process outliving the sandbox."""

from __future__ import annotations

import http.server
import os
import sys
import threading
import time

import psutil
import pytest

from openenv.core.net import free_port
from openenv.harness.sandbox import Limits, LocalSandbox
from openenv.harness.sandbox import local as local_mod


def _alive(proc: psutil.Process) -> bool:
    """Still running and not a zombie. A `Process`, not a pid: pids wrap within seconds on a busy
    machine (pid_max 32768), and a reused pid is someone else's process."""
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_workspace_and_home_are_private_temp_folders():
    with LocalSandbox() as box:
        box.write_files({"pkg/a.py": "x = 1\n"})
        assert box.read_file("pkg/a.py") == "x = 1\n"
        result = box.run(["sh", "-c", 'echo "$HOME|$PWD"'])
        assert result.output.strip() == f"{box.home}|/app"  # the workdir, at its Harbor path
        assert box.home != os.path.expanduser("~")
        root = box.root
    assert not root.exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="HOME is handed to the sandbox's uid only by a root caller")
def test_home_is_handed_over_before_the_agent_runs_and_not_walked_again_after_it(monkeypatch):
    """Harness configs written by this (root) process become the sandbox's uid's before the harness
    starts. After `end_agent()`, HOME holds only what the agent left: the tests' run does not walk it
    again (codex leaves ~100 files there; the walk cost ~1 ms of every episode)."""
    with LocalSandbox() as box:
        (box.home / ".config.toml").write_text("model = 'x'\n")  # as a harness spec writes it, as root
        walked: list[str] = []
        hand_over = LocalSandbox.hand_over
        monkeypatch.setattr(
            LocalSandbox, "hand_over", lambda self, path: (walked.append(str(path)), hand_over(self, path))
        )
        assert box.run(["sh", "-c", "echo more >> ~/.config.toml"]).exit_code == 0
        assert walked.count(str(box.home)) == 1
        box.end_agent()
        assert box.run(["sh", "-c", "ls -a ~"]).exit_code == 0
        assert walked.count(str(box.home)) == 1, walked


def test_environment_is_an_allow_list(monkeypatch):
    monkeypatch.setenv("OPENENV_SECRET_TOKEN", "leak")
    with LocalSandbox() as box:
        out = box.run(["sh", "-c", "env"], env={"EXTRA": "yes"}).output
    assert "OPENENV_SECRET_TOKEN" not in out
    assert "EXTRA=yes" in out


def test_exit_statuses_are_reported():
    with LocalSandbox() as box:
        ok = box.start(["sh", "-c", "echo done"], env={}, timeout_s=10)
        bad = box.start(["sh", "-c", "echo oops >&2; exit 3"], env={}, timeout_s=10)
        crash = box.start(["sh", "-c", "kill -SEGV $$"], env={}, timeout_s=10)
        assert ok.wait(10) == "exited" and "done" in ok.output_tail()
        assert bad.wait(10) == "failed" and bad.exit_code() == 3 and "oops" in bad.output_tail()
        assert crash.wait(10) == "crashed"


def test_a_hanging_process_times_out_and_its_tree_is_killed():
    with LocalSandbox() as box:
        proc = box.start(["sh", "-c", "sleep 60 & sleep 60"], env={}, timeout_s=3)
        root = psutil.Process(proc.pid)
        children: list[psutil.Process] = []
        deadline = time.monotonic() + 2.5
        while not children and time.monotonic() < deadline:  # a loaded machine forks slowly
            children = root.children(recursive=True)
            time.sleep(0.05)
        assert children
        assert proc.wait(10) == "timeout"
        deadline = time.monotonic() + 10  # SIGKILLed; a loaded machine may take a moment to reap them
        while [p for p in [root, *children] if _alive(p)] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not [p for p in [root, *children] if _alive(p)]
        assert box.leftover_pids() == []


def test_a_daemon_that_escapes_the_process_group_dies_on_close():
    """Cline's hub daemon calls setsid and outlives its parent; the sandbox marker still finds it."""
    box = LocalSandbox()
    proc = box.start(["sh", "-c", "setsid sleep 120 & echo started; sleep 120"], env={}, timeout_s=30)
    deadline = time.monotonic() + 10
    while len(escaped := [p for p in map(psutil.Process, box.leftover_pids()) if p.name() == "sleep"]) < 2:
        assert time.monotonic() < deadline, "the setsid child should be running before close"
        time.sleep(0.05)
    assert proc.status() == "running"
    box.close()
    assert not any(_alive(pid) for pid in escaped)
    assert box.leftover_pids() == []


def test_resource_limits_apply():
    limits = Limits(file_size_mb=1, open_files=64)
    with LocalSandbox(limits=limits) as box:
        out = box.run(["sh", "-c", "ulimit -n; ulimit -f"]).output.split()
        big = box.run(["sh", "-c", "head -c 3000000 /dev/zero > big.bin"])
    assert out[0] == "64"
    assert int(out[1]) * 512 == 1 << 20 or int(out[1]) * 1024 == 1 << 20
    assert big.exit_code != 0


class _Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"hello from the host"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def _no_namespace(ports: tuple[int, ...]) -> None:
    raise PermissionError(1, "unshare(CLONE_NEWNET): Operation not permitted")


@pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")
@pytest.mark.parametrize("carried_by", ["our namespace", "the forwarder"])
def test_loopback_namespace_has_only_lo_and_reaches_the_forwarded_port(carried_by, monkeypatch):
    """Both ways of carrying the proxy's port in: the namespace openenv makes (root), and the in-sandbox
    forwarder where it cannot make one (no CAP_SYS_ADMIN)."""
    if carried_by == "the forwarder":
        monkeypatch.setattr(local_mod, "LoopbackNamespace", _no_namespace)
    port = free_port()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), _Hello)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    probe = (
        "import os, urllib.request\n"
        f"print(urllib.request.urlopen('http://127.0.0.1:{port}/', timeout=5).read().decode())\n"
        "lines = open('/proc/self/net/dev').read().splitlines()[2:]\n"
        "print('interfaces', sorted(line.split(':')[0].strip() for line in lines))\n"
    )
    try:
        with LocalSandbox(network="loopback", forward_ports=(port,)) as box:
            result = box.run([sys.executable, "-c", probe], timeout_s=30)
    finally:
        server.shutdown()
    assert "hello from the host" in result.output, result.output
    assert "interfaces ['lo']" in result.output
