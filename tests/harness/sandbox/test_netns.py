"""The proxy's ports inside a namespace this process made (`sandbox/netns.py`): reached with nothing of
ours running in the sandbox, nothing else reachable, nothing the sandbox can change, nothing left after."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from openenv.harness.sandbox import LocalSandbox
from openenv.harness.sandbox.netns import LoopbackNamespace
from tests.harness.conftest import upper_echo_server

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="a network namespace of our making needs root")


def _probe(port: int) -> str:
    """Python run in the sandbox: the port's echo, every process it can see, and where it can connect."""
    return (
        "import os, socket\n"
        f"s = socket.create_connection(('127.0.0.1', {port}), timeout=5)\n"
        "s.sendall(b'ping'); print('echo', s.recv(10).decode())\n"
        "for pid in sorted(p for p in os.listdir('/proc') if p.isdigit()):\n"
        "    try: print('proc', open(f'/proc/{pid}/cmdline', 'rb').read().replace(b'\\0', b' ').decode())\n"
        "    except OSError: pass\n"
    )


def test_the_proxys_port_is_reached_with_no_process_of_ours_in_the_sandbox():
    """The forwarder was a Python process in every sandboxed command, which each command waited for
    before it started (44 ms of every harness start). Now the command's own processes are all there is."""
    echo, port = upper_echo_server()
    try:
        with LocalSandbox(forward_ports=(port,)) as box:
            result = box.run([sys.executable, "-I", "-c", _probe(port)], timeout_s=30)
    finally:
        echo.close()
    assert result.exit_code == 0, result.output
    assert "echo PING" in result.output
    seen = [line for line in result.output.splitlines() if line.startswith("proc ")]
    assert seen and not any("forwarder" in line for line in seen), seen
    assert not any("python" in line and "-c" not in line for line in seen), seen


def test_only_the_proxys_port_is_reachable_and_only_lo_is_there():
    echo, port = upper_echo_server()
    other, other_port = upper_echo_server()  # another service on this host's 127.0.0.1
    probe = (
        "import socket\n"
        "print('interfaces', sorted(l.split(':')[0].strip() for l in open('/proc/self/net/dev').readlines()[2:]))\n"
        f"try: socket.create_connection(('127.0.0.1', {other_port}), timeout=5); print('reached the other')\n"
        "except OSError as exc: print('other refused', type(exc).__name__)\n"
        f"socket.create_connection(('127.0.0.1', {port}), timeout=5); print('proxy reached')\n"
    )
    try:
        with LocalSandbox(forward_ports=(port,)) as box:
            result = box.run([sys.executable, "-I", "-c", probe], timeout_s=30)
    finally:
        echo.close()
        other.close()
    assert "interfaces ['lo']" in result.output, result.output
    assert "other refused ConnectionRefusedError" in result.output, result.output
    assert "proxy reached" in result.output


def test_the_sandbox_cannot_reconfigure_the_namespace():
    """The namespace belongs to the host's user namespace: the sandbox's uid has no CAP_NET_ADMIN there,
    so it can neither take `lo` down under the next command nor add an address or a route."""
    echo, port = upper_echo_server()
    ip = next((p for p in ("/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip") if os.path.exists(p)), None)
    if ip is None:
        pytest.skip("iproute2 is not installed")
    try:
        with LocalSandbox(forward_ports=(port,)) as box:
            tries = box.run(
                [
                    "sh",
                    "-c",
                    f"{ip} link set lo down; echo down=$?; {ip} addr add 10.9.9.9/32 dev lo; echo addr=$?",
                ],
                timeout_s=30,
            )
            after = box.run([sys.executable, "-I", "-c", _probe(port)], timeout_s=30)
    finally:
        echo.close()
    assert "down=0" not in tries.output and "addr=0" not in tries.output, tries.output
    assert "echo PING" in after.output, after.output


def _net_namespaces_held() -> set[str]:
    """The network namespaces this process holds descriptors to, besides its own."""
    own = os.readlink("/proc/self/ns/net")
    held = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("net:[") and target != own:
            held.add(target)
    return held


def test_closing_cuts_open_connections_and_lets_the_namespace_go():
    """A client still connected when the agent's side ends (the listeners share one loop, so nothing
    ends their connections with it) is cut off, and no descriptor keeps the namespace alive."""
    echo, port = upper_echo_server()
    before = _net_namespaces_held()
    space = LoopbackNamespace((port,))
    client = (
        "import socket, sys, time\n"
        f"s = socket.create_connection(('127.0.0.1', {port}), timeout=10)\n"
        "s.sendall(b'a'); print(s.recv(1).decode(), flush=True)\n"
        "try:\n"
        "    print('after close:', s.recv(1) or b'eof', flush=True)\n"
        "except OSError as exc:\n"
        "    print('after close:', type(exc).__name__, flush=True)\n"
    )
    inside = subprocess.Popen(
        [*space.enter_argv(), sys.executable, "-I", "-c", client], stdout=subprocess.PIPE, text=True
    )
    try:
        assert inside.stdout is not None
        assert inside.stdout.readline().strip() == "A"  # connected, through to the host's echo
        assert _net_namespaces_held() - before
        space.close()
        out, _ = inside.communicate(timeout=10)
    finally:
        inside.kill()
        echo.close()
    assert "after close: b'eof'" in out or "after close: ConnectionResetError" in out, out
    deadline = time.monotonic() + 5
    while _net_namespaces_held() - before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _net_namespaces_held() - before
    space.close()  # idempotent
