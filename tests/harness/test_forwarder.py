"""The two forwarder halves carry bytes both ways: TCP -> unix socket -> TCP (what the netns uses)."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from openenv.core.net import free_port
from openenv.harness.forwarder import UnixToTcpBridge, serve_tcp_to_unix, serve_tcp_to_unix_threads
from openenv.harness.sandbox import LocalSandbox
from openenv.harness.sandbox import local as local_mod
from openenv.harness.sandbox.rootfs import ImageRoot
from tests.harness.conftest import upper_echo_server


@contextlib.contextmanager
def _forwarding(tmp_path: Path) -> Iterator[tuple[int, UnixToTcpBridge]]:
    """Both halves in front of an upper-casing echo server: yields the inner half's TCP port and the bridge
    (the outer half), and stops everything on exit."""
    echo, echo_port = upper_echo_server()
    bridge = UnixToTcpBridge(tmp_path / "proxy.sock", "127.0.0.1", echo_port).start()
    inner_port, ready = free_port(), tmp_path / "ready"
    loop = asyncio.new_event_loop()

    async def inner_half() -> None:
        with contextlib.suppress(asyncio.CancelledError):
            await serve_tcp_to_unix("127.0.0.1", inner_port, str(bridge.socket_path), ready)

    task = loop.create_task(inner_half())
    thread = threading.Thread(target=loop.run_until_complete, args=(task,), daemon=True)
    thread.start()
    try:
        while not ready.exists():
            time.sleep(0.01)
        yield inner_port, bridge
    finally:
        loop.call_soon_threadsafe(task.cancel)
        thread.join(5)
        loop.close()
        bridge.close()
        echo.close()


def _round_trip(port: int, payload: bytes, timeout: float) -> bytes:
    """Send `payload`, close the sending side, and read until the other end closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as client:
        client.sendall(payload)
        client.shutdown(socket.SHUT_WR)
        received = b""
        while chunk := client.recv(65536):
            received += chunk
    return received


def test_bytes_round_trip_through_both_halves(tmp_path):
    with _forwarding(tmp_path) as (inner_port, bridge):
        payload = b"x" * 200_000
        assert _round_trip(inner_port, payload, timeout=5) == payload.upper()
    assert not bridge.socket_path.exists()


def test_a_connection_survives_the_garbage_collector_while_both_sides_are_paused(tmp_path):
    """Hundreds of 200 KB round trips, each long enough for flow control to pause reading on both of its
    sockets: a connection task kept only by the loop's weak reference was collected mid-copy in about 2%
    of them (the client got b"" and "Task was destroyed but it is pending!" was logged)."""
    thresholds = gc.get_threshold()
    gc.set_threshold(50)  # collect often, so also while a copy is paused
    try:
        with _forwarding(tmp_path) as (inner_port, _bridge):
            payload = b"x" * 200_000
            cut = sum(_round_trip(inner_port, payload, timeout=30) != payload.upper() for _ in range(300))
        assert cut == 0, f"{cut} of 300 round trips were cut off"
    finally:
        gc.set_threshold(*thresholds)


def test_the_script_starts_without_asyncio_and_carries_bytes_both_ways(tmp_path):
    """Every sandboxed command waits for this script to listen before the harness starts: it must not pay
    for importing asyncio (0.07 CPU-s of its 0.1 CPU-s start, seconds of wall on a loaded machine)."""
    import subprocess
    import sys

    from openenv.harness import forwarder

    echo, echo_port = upper_echo_server()
    bridge = UnixToTcpBridge(tmp_path / "proxy.sock", "127.0.0.1", echo_port).start()
    inner_port, ready = free_port(), tmp_path / "ready"
    # -I -S as the sandbox runs it; report the modules it loaded once it is listening.
    probe = (
        "import runpy, sys, threading, pathlib\n"
        f"ready = pathlib.Path({str(ready)!r})\n"
        "def report():\n"
        "    import time\n"
        "    while not ready.exists(): time.sleep(0.01)\n"
        "    print(sorted(sys.modules), flush=True)\n"
        "threading.Thread(target=report, daemon=True).start()\n"
        f"sys.argv = ['forwarder.py', '--listen', '127.0.0.1:{inner_port}', '--to-unix', {str(bridge.socket_path)!r},"
        f" '--ready', {str(ready)!r}]\n"
        f"runpy.run_path({forwarder.__file__!r}, run_name='__main__')\n"
    )
    proc = subprocess.Popen([sys.executable, "-I", "-S", "-c", probe], stdout=subprocess.PIPE, text=True)
    try:
        modules = proc.stdout.readline()
        assert modules, "the forwarder script never became ready"
        assert "'asyncio'" not in modules
        payload = b"y" * 300_000
        assert _round_trip(inner_port, payload, timeout=10) == payload.upper()
        assert _round_trip(inner_port, b"twice", timeout=10) == b"TWICE"
    finally:
        proc.kill()
        proc.wait(5)
        bridge.close()
        echo.close()


def test_a_forwarder_that_cannot_listen_says_so_on_its_ready_fifo(tmp_path):
    """The sandbox's shell blocks reading the FIFO until the forwarder writes it: a bind that fails must
    write `failed` (the shell then exits 111 with a message) instead of leaving the harness never started."""
    ready = tmp_path / "ready"
    os.mkfifo(ready)
    heard: list[str] = []
    reader = threading.Thread(target=lambda: heard.append(ready.read_text()))
    reader.start()
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        with pytest.raises(OSError):
            serve_tcp_to_unix_threads("127.0.0.1", port, str(tmp_path / "none.sock"), ready)
    reader.join(10)
    assert heard == ["failed\n"]


def _refused(ports: tuple[int, ...]) -> None:
    raise PermissionError(1, "unshare(CLONE_NEWNET): Operation not permitted")


def _image_without_python(root: Path) -> ImageRoot:
    """An unpacked image holding only this host's `sh` and the libraries it loads: no python3."""
    sh = Path(shutil.which("sh") or "/bin/sh").resolve()
    ldd = subprocess.run(["ldd", str(sh)], capture_output=True, text=True, check=True).stdout
    for source in [sh, *(Path(word) for word in ldd.split() if word.startswith("/"))]:
        relative = source.relative_to("/")
        dest = root / "rootfs" / (relative if relative.parts[0] == "usr" else Path("usr", *relative.parts))
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source.resolve(), dest)
    shutil.copy2(sh, root / "rootfs" / "usr" / "bin" / "sh")
    (root / "rootfs" / "etc").mkdir()
    for link in ("bin", "lib", "lib64"):
        (root / "rootfs" / link).symlink_to(f"usr/{link}")
    root.chmod(0o755)
    return ImageRoot(reference="no-python:1", digest="sha256:0", path=root, env={"PATH": "/usr/bin:/bin"})


@pytest.mark.skipif(os.geteuid() != 0, reason="an image root in the local sandbox is set up as root here")
def test_an_image_without_python3_fails_the_harness_start_instead_of_hanging(tmp_path, monkeypatch):
    """Where the sandbox cannot have a namespace of this process's making (no CAP_SYS_ADMIN), the
    forwarder runs on the image's python3. Where there is none, nothing ever opened the ready FIFO to
    write `failed`, and the shell waited for a writer until the harness's timeout."""
    monkeypatch.setattr(local_mod, "LoopbackNamespace", _refused)
    image = _image_without_python(tmp_path / "image")
    with LocalSandbox(image=image, forward_ports=(free_port(),)) as box:
        result = box.run(["sh", "-c", "echo the harness ran"], timeout_s=60)
    assert not result.timed_out, result
    assert result.exit_code == 111, result
    assert "the forwarder to port" in result.output and "the harness ran" not in result.output


@pytest.mark.skipif(os.geteuid() != 0, reason="an image root in the local sandbox is set up as root here")
def test_an_image_without_python3_starts_its_harness_with_the_proxys_port_forwarded(tmp_path):
    """Run as root, the proxy's port listens in a namespace this process made (`sandbox/netns.py`):
    nothing runs in the sandbox to carry it, so an image with no python3 starts its harness (which the
    forwarder's start refused, above). That the port is reached is `tests/harness/sandbox/test_netns.py`."""
    image = _image_without_python(tmp_path / "image")
    with LocalSandbox(image=image, forward_ports=(free_port(),)) as box:
        result = box.run(["sh", "-c", "echo the harness ran"], timeout_s=60)
    assert result.exit_code == 0, result
    assert "the harness ran" in result.output
