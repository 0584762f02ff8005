"""The local sandbox is a boundary: each attack of issue 17, tried from inside, fails.

Every test here runs the attack as the sandbox's own process (what a policy can make a harness run)
and checks the host afterwards. The machine must offer bubblewrap and cgroups (CI installs both).
"""

from __future__ import annotations

import http.server
import logging
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from openenv.core.net import free_port
from openenv.errors import EnvError
from openenv.harness.sandbox import Limits, LocalSandbox
from openenv.harness.sandbox import isolation as isolation_mod

# A probe run inside with this test's Python (the sandbox shows it read-only): tries to reach `port`
# on 127.0.0.1 directly, and from the network namespace of every process it can see, via nsenter.
_NSENTER_PROBE = """
import os, socket, subprocess, sys
port = int(sys.argv[1])
def reach():
    s = socket.socket(); s.settimeout(2)
    try:
        s.connect(("127.0.0.1", port)); return True
    except OSError:
        return False
    finally:
        s.close()
print("direct", reach())
pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
pids += [os.getppid(), 1]
for pid in pids:
    code = ("import socket,sys; s=socket.socket(); s.settimeout(2); s.connect(('127.0.0.1', %d)); print('IN')" % port)
    out = subprocess.run(["nsenter", "-t", str(pid), "-n", "--", sys.executable, "-c", code],
                         capture_output=True, text=True, timeout=10)
    print("nsenter", pid, "reached" if "IN" in out.stdout else "refused", out.stderr.strip()[-80:])
"""


class _Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def host_only_port() -> Iterator[int]:
    """A server on the host's 127.0.0.1 that no sandbox is given."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), _Hello)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()


def _host_processes_with(needle: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter():
        try:
            if needle in " ".join(proc.cmdline()) and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def _wait_for(predicate: object, seconds: float = 10) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return False


def test_nsenter_into_any_visible_process_does_not_reach_the_host_network(host_only_port):
    with LocalSandbox(network="loopback") as box:
        result = box.run([sys.executable, "-c", _NSENTER_PROBE, str(host_only_port)], timeout_s=120)
    lines = result.output.splitlines()
    assert "direct False" in lines, result.output
    tried = [line for line in lines if line.startswith("nsenter ")]
    assert tried, result.output
    assert not [line for line in tried if " reached" in line], result.output


def test_the_host_environment_is_not_readable_through_proc():
    """The sandbox's owner was started with a secret in its environment (as `openenv serve` would be
    with HF_TOKEN); the allow-list keeps it out of the harness's env, and /proc must not hand it over."""
    secret = f"hf_{uuid.uuid4().hex}"
    owner = (
        "from openenv.harness.sandbox import LocalSandbox\n"
        "with LocalSandbox() as box:\n"
        "    print(box.run(['sh', '-c', 'cat /proc/$PPID/environ; for f in /proc/[0-9]*/environ; do cat $f; done; '\n"
        "                  'echo; env; echo walked'], timeout_s=60).output)\n"
    )
    walk = subprocess.run(
        [sys.executable, "-c", owner],
        env={**os.environ, "HF_TOKEN": secret},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "walked" in walk.stdout, walk.stdout + walk.stderr
    assert secret not in walk.stdout


def test_the_harness_runs_unprivileged_without_capabilities():
    with LocalSandbox() as box:
        out = box.run(
            [
                "sh",
                "-c",
                "id -u; grep -E '^(CapEff|CapBnd|NoNewPrivs)' /proc/self/status; "
                "unshare -U true && echo NESTED-USERNS; ls /var/run/docker.sock 2>&1; "
                "ls /proc | grep -c '^[0-9]'",
            ],
            timeout_s=30,
        ).output
    lines = out.splitlines()
    assert lines[0] != "0", out
    assert "CapEff:\t0000000000000000" in lines and "CapBnd:\t0000000000000000" in lines, out
    assert "NoNewPrivs:\t1" in lines, out
    assert "NESTED-USERNS" not in out
    assert "No such file" in out  # no Docker socket: no way to the engine
    assert int(lines[-1]) < 10, out  # a fresh /proc: only the sandbox's own few processes


# Tries PTRACE_ATTACH on every process the sandbox shows but itself; prints `NAME errno` (0: attached).
_ATTACH_PROBE = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
for name in sorted(os.listdir("/proc"), key=lambda n: (len(n), n)):
    if name.isdigit() and int(name) != os.getpid():
        ctypes.set_errno(0)
        ok = libc.ptrace(16, int(name), None, None) == 0
        comm = open(f"/proc/{name}/comm").read().strip()
        print(comm, 0 if ok else ctypes.get_errno(), flush=True)
        if ok:
            os.waitpid(int(name), 0x40000000)
            libc.ptrace(17, int(name), None, None)
"""


def test_the_sandboxs_own_bwrap_processes_cannot_be_traced():
    """The outer bwrap's init (pid 1) is root's. Where the seccomp filter is not known, an inner bwrap
    runs as the sandbox's uid in the host's user namespace (pid 2 inside): traced, it could make a user
    namespace for the sandbox after all."""
    with LocalSandbox() as box:
        out = box.run([sys.executable, "-c", _ATTACH_PROBE], timeout_s=60).output
    bwraps = [line.split()[1] for line in out.splitlines() if line.startswith("bwrap ")]
    assert bwraps, out  # as root: the outer one's init (and the inner one, without the filter)
    assert "0" not in bwraps, out


@pytest.mark.parametrize("ender", ["end_agent", "close"])
def test_a_setsid_daemon_without_the_marker_does_not_survive(ender):
    tag = f"{time.time_ns() % 10**6}.{os.getpid()}"  # a sleep length no other process uses
    box = LocalSandbox()
    try:
        box.start(
            [
                "sh",
                "-c",
                f"env -u OPENENV_SANDBOX setsid sh -c 'sleep {tag}' & "
                f"(env -u OPENENV_SANDBOX setsid sh -c 'sleep {tag}' &) ; sleep 300",
            ],
            env={},
            timeout_s=120,
        )
        assert _wait_for(lambda: len(_host_processes_with(f"sleep {tag}")) >= 2), "daemons never started"
        getattr(box, ender)()
        assert _wait_for(lambda: not _host_processes_with(f"sleep {tag}"), 5), _host_processes_with(
            f"sleep {tag}"
        )
    finally:
        box.close()
    assert not _host_processes_with(f"sleep {tag}")


def test_a_daemon_left_behind_by_an_exited_command_is_gone_with_it():
    tag = f"{time.time_ns() % 10**6}.{os.getpid() + 1}"
    with LocalSandbox() as box:
        box.run(["sh", "-c", f"env -u OPENENV_SANDBOX setsid sh -c 'sleep {tag}' & exit 0"], timeout_s=30)
        assert _wait_for(lambda: not _host_processes_with(f"sleep {tag}"), 5)


def test_a_fork_bomb_is_held_at_the_pids_limit_and_ended():
    with LocalSandbox(limits=Limits(pids=64)) as box:
        process = box.start(["sh", "-c", "bomb() { bomb | bomb & }; bomb; sleep 30"], env={}, timeout_s=60)
        assert _wait_for(lambda: box.usage().get("pids_refused", 0) > 0), box.usage()
        usage = box.usage()
        assert usage["pids_peak"] <= 64 and usage["pids_refused"] > 0, usage  # it hit the limit, no further
        assert len(box.leftover_pids()) <= 64
        box.end_agent()
        assert box.leftover_pids() == []
        assert process.status() != "running"


def test_a_memory_hog_is_killed_at_the_memory_limit():
    hog = "b = bytearray(512 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1\nprint('survived')"
    with LocalSandbox(limits=Limits(memory_mb=128)) as box:
        result = box.run([sys.executable, "-c", hog], timeout_s=60)
        usage = box.usage()
        after = box.run(["echo", "still usable"], timeout_s=30)
    assert "survived" not in result.output
    assert result.exit_code == -9, result
    assert usage["oom_kills"] >= 1 and usage["memory_peak_bytes"] <= 128 << 20, usage
    assert after.output.strip() == "still usable"


def test_writes_outside_the_workspace_land_inside_the_sandbox_or_nowhere():
    name = f"openenv-escape-{uuid.uuid4().hex}"
    with LocalSandbox() as box:
        box.run(
            [
                "sh",
                "-c",
                f"echo tmp > /tmp/{name}; echo up > ../../{name}; echo root > /{name}; "
                f"mkdir -p /logs/verifier && echo planted > /logs/verifier/{name}",
            ],
            timeout_s=30,
        )
        assert (box.root / "tmp" / name).read_text() == "tmp\n"  # the sandbox's own /tmp
        assert box.host_path(f"/logs/verifier/{name}").exists()  # its own reward folder (fresh_dir clears it)
    for path in (Path("/tmp") / name, Path("/") / name, Path("/logs")):
        assert not path.exists(), path


def test_no_isolation_available_is_refused_naming_the_missing_piece(monkeypatch):
    monkeypatch.setattr(isolation_mod, "bwrap_binary", lambda: None)
    with pytest.raises(EnvError, match="bubblewrap.*--isolation none"):
        LocalSandbox()


def test_the_opt_outs_are_explicit_and_warned_on_every_sandbox(caplog):
    with caplog.at_level(logging.WARNING, logger="openenv.sandbox"):
        for _ in range(2):
            with LocalSandbox(isolation="none", network="host") as box:
                assert box.run(["true"]).exit_code == 0
    assert len([r for r in caplog.records if "isolation='none'" in r.getMessage()]) == 2
    assert len([r for r in caplog.records if "network='host'" in r.getMessage()]) == 2
