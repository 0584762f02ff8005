"""A real multi-node Ray cluster on one machine, inside a private loopback-only network namespace.

Outside such a namespace Ray replaces 127.0.0.1 with the machine's interface address and sends its
traffic there; inside one (`unshare --net`, `lo` up) the only addresses are 127.0.0.0/8, so a head on
127.0.0.1 and worker nodes on 127.0.0.2, 127.0.0.3... form a real cluster that reaches nothing else. The
namespace has its own ports too, so clusters of parallel test runs never collide.

The driver (a test's script, `openenv eval --ray auto`) runs in the same namespace through `run()` /
`popen()`. Engines outside are carried in by a forwarder: 127.0.0.1:PORT inside the namespace -> a unix
socket -> 127.0.0.1:PORT outside (`openenv/harness/forwarder.py`), so a test reuses the session's vLLM
server instead of starting a second one (1.8 GB) inside.

Stopping kills exactly the processes in this namespace (found by their `/proc/<pid>/ns/net`), never by
name: other Ray clusters on the machine are left alone. Needs root (`unshare`, `nsenter`) and Ray.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Self

import psutil

from openenv.harness import forwarder
from openenv.harness.forwarder import UnixToTcpBridge

__all__ = ["LoopbackRayCluster", "cluster_unavailable"]

# Mounts an empty read-only tmpfs over each folder before `--`, then runs what follows.
_HIDE_SCRIPT = (
    'while [ "$1" != "--" ]; do mount -t tmpfs -o size=1m,mode=755,ro openenv-hidden "$1" || exit 1; '
    'shift; done; shift; exec "$@"'
)
GCS_PORT = 6390  # outside Ray's worker-port range (10002-19999), private to the namespace anyway


def cluster_unavailable() -> str | None:
    """Why a loopback cluster cannot run here (None: it can)."""
    if os.geteuid() != 0:
        return "a loopback Ray cluster needs root (unshare --net, nsenter)"
    for tool in ("unshare", "nsenter", "ip"):
        if shutil.which(tool) is None and not Path(f"/usr/sbin/{tool}").exists():
            return f"{tool} is not installed"
    try:
        import ray  # noqa: F401
    except ImportError:
        from openenv.extras import install_hint

        return f"Ray is not installed: {install_hint('ray')}"
    return None


class LoopbackRayCluster:
    """A head on 127.0.0.1 and `workers` nodes on 127.0.0.2.. in a fresh network namespace.

    Args:
        workers: worker nodes besides the head.
        slots: the `openenv_episode_slot` resource each node offers.
        object_store_mb: each node's object store (small: the machine is shared).
        env: extra environment for the nodes and the drivers (PYTHONPATH, caches).
        forward: `{port: outside port}` engines to carry into the namespace on 127.0.0.1.
        hide: `{node ip: [folders]}` hidden from that node only (an empty tmpfs mounted over each, in a
            mount namespace of the node's own), e.g. one harness install, for a node that lacks what the
            others have. The nodes share this machine's filesystem otherwise.
    """

    def __init__(
        self,
        *,
        workers: int = 1,
        slots: int = 1,
        object_store_mb: int = 80,
        env: dict[str, str] | None = None,
        forward: dict[int, int] | None = None,
        hide: dict[str, list[str]] | None = None,
    ) -> None:
        self.workers, self.slots, self.object_store_mb = workers, slots, object_store_mb
        self.root = Path(tempfile.mkdtemp(prefix="oe-ray-"))  # short: Ray's unix socket paths must fit
        self.env = {
            **os.environ,
            **(env or {}),
            "RAY_TMPDIR": str(self.root),
            "RAY_ADDRESS": self.address,
            # a lost node is declared dead in ~3 s, not ~30 s
            "RAY_health_check_period_ms": "1000",
            "RAY_health_check_failure_threshold": "3",
            "RAY_health_check_initial_delay_ms": "1000",
            "RAY_USAGE_STATS_ENABLED": "0",
        }
        self._forward = forward or {}
        self._hide = hide or {}
        self._holder: subprocess.Popen[bytes] | None = None
        self._bridges: list[UnixToTcpBridge] = []
        self.started_s = 0.0

    @property
    def address(self) -> str:
        return f"127.0.0.1:{GCS_PORT}"

    def node_ips(self) -> list[str]:
        return [f"127.0.0.{i + 1}" for i in range(self.workers + 1)]

    # ---- lifecycle ----------------------------------------------------------------------------------

    def start(self) -> Self:
        begin = time.monotonic()
        ready = self.root / "netns-ready"
        self._holder = subprocess.Popen(
            ["unshare", "--net", "--", "sh", "-c", f"ip link set lo up && touch {ready} && exec sleep 86400"],
            start_new_session=True,
        )
        deadline = time.monotonic() + 10
        while not ready.exists():
            if self._holder.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("could not make a loopback-only network namespace (unshare --net)")
            time.sleep(0.05)
        try:
            for inside, outside in self._forward.items():
                self._carry(inside, outside)
            self._ray_start(
                [
                    "--head",
                    "--node-ip-address",
                    "127.0.0.1",
                    "--port",
                    str(GCS_PORT),
                    "--include-dashboard=false",
                    "--temp-dir",
                    str(self.root),
                ],
                "127.0.0.1",
            )
            for ip in self.node_ips()[1:]:
                self._ray_start(["--address", self.address, "--node-ip-address", ip], ip)
            self._wait_for_nodes(len(self.node_ips()))
        except BaseException:
            self.stop()
            raise
        self.started_s = round(time.monotonic() - begin, 1)
        return self

    def stop(self) -> None:
        """Kill every process in the namespace (the cluster, drivers, harnesses), then the bridges."""
        procs = self.processes()
        for proc in procs:
            try:
                proc.send_signal(signal.SIGKILL)
            except psutil.NoSuchProcess:
                continue
        psutil.wait_procs(procs, timeout=10)
        if self._holder is not None:
            self._holder.wait(5)
            self._holder = None
        for bridge in self._bridges:
            bridge.close()
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- running things inside ----------------------------------------------------------------------

    def command(self, argv: list[str]) -> list[str]:
        """`argv` wrapped to run inside the namespace."""
        assert self._holder is not None, "start() the cluster first"
        return ["nsenter", f"--net=/proc/{self._holder.pid}/ns/net", "--", *argv]

    def run(
        self, argv: list[str], *, timeout: float, env: dict[str, str] | None = None, cwd: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.command(argv),
            env={**self.env, **(env or {})},
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def popen(
        self, argv: list[str], *, env: dict[str, str] | None = None, **kwargs: Any
    ) -> subprocess.Popen[str]:
        return subprocess.Popen(self.command(argv), env={**self.env, **(env or {})}, text=True, **kwargs)

    def processes(self) -> list[psutil.Process]:
        """Every live process in this namespace (the holder included)."""
        if self._holder is None:
            return []
        try:
            mine = os.readlink(f"/proc/{self._holder.pid}/ns/net")
        except OSError:
            return []
        found = []
        for proc in psutil.process_iter():
            try:
                if os.readlink(f"/proc/{proc.pid}/ns/net") == mine:
                    found.append(proc)
            except (OSError, psutil.NoSuchProcess):
                continue
        return found

    def raylet_pid(self, ip: str) -> int:
        """The PID of the raylet of the node at `ip` (to kill it in a fault test)."""
        for proc in self.processes():
            try:
                line = proc.cmdline()
            except psutil.NoSuchProcess:
                continue
            if line and line[0].endswith("raylet") and f"--node_ip_address={ip}" in line:
                return proc.pid
        raise LookupError(f"no raylet for {ip} in the cluster")

    def memory_mb(self) -> float:
        """Resident memory of everything in the namespace, in MB."""
        total = 0
        for proc in self.processes():
            try:
                total += proc.memory_info().rss
            except psutil.NoSuchProcess:
                continue
        return round(total / 1e6, 1)

    # ---- internals ----------------------------------------------------------------------------------

    def _ray_start(self, args: list[str], ip: str) -> None:
        ray_bin = str(Path(sys.executable).with_name("ray"))
        argv = [
            ray_bin,
            "start",
            *args,
            "--num-cpus",
            "1",
            "--object-store-memory",
            str(self.object_store_mb * 1_000_000),
            "--resources",
            json.dumps({"openenv_episode_slot": self.slots}),
            "--disable-usage-stats",
        ]
        if self._hide.get(ip):  # the node's processes (raylet, workers) inherit the mount namespace
            argv = [
                "unshare",
                "--mount",
                "--propagation",
                "private",
                "--",
                "sh",
                "-c",
                _HIDE_SCRIPT,
                "sh",
                *self._hide[ip],
                "--",
                *argv,
            ]
        done = self.run(argv, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(
                f"`ray start {' '.join(args[:2])}` failed ({done.returncode}): "
                f"{(done.stderr or done.stdout)[-2000:]}"
            )

    def _wait_for_nodes(self, count: int, timeout: float = 60) -> None:
        probe = (
            "import ray, json; ray.init(address='auto', log_to_driver=False); "
            "print(json.dumps(sum(n['Alive'] for n in ray.nodes())))"
        )
        deadline = time.monotonic() + timeout
        while True:
            done = self.run([sys.executable, "-c", probe], timeout=60)
            if done.returncode == 0 and done.stdout.strip().splitlines()[-1:] == [str(count)]:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"the cluster did not reach {count} live nodes: {done.stdout[-500:]} "
                    f"{done.stderr[-1500:]}"
                )
            time.sleep(1)

    def _carry(self, inside: int, outside: int) -> None:
        sock = self.root / f"fwd-{outside}.sock"
        self._bridges.append(UnixToTcpBridge(sock, "127.0.0.1", outside).start())
        ready = self.root / f"fwd-{outside}.ready"
        self.popen(
            [
                sys.executable,
                forwarder.__file__,
                "--listen",
                f"127.0.0.1:{inside}",
                "--to-unix",
                str(sock),
                "--ready",
                str(ready),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 15
        while not ready.exists():
            if time.monotonic() > deadline:
                raise RuntimeError(f"the forwarder for port {outside} did not start in the namespace")
            time.sleep(0.05)
