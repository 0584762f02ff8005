"""`EpisodeWorker`: one episode slot on one Ray node, with its own capture proxy and sandboxes there.

A harness always talks to a proxy on its own host: the worker starts a `CaptureServer` on the node's
loopback (one per engine spec it is sent, reused across its episodes), and every sandbox it makes lives
on the same node, under the worker's own temp folder. The engine is the only thing reached over the
network, by the proxy, token ids in and out.

The class is plain Python (tests and the thread path can build one); `cluster.py` wraps it with
`ray.remote`. `__init__` checks the node first (`preflight.py`) and raises `NodeNotReady` naming the
node and what it lacks, so a bad cluster fails at start, not one masked group at a time.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from openenv.capture.engine import CapturePool
from openenv.capture.server import CaptureServer
from openenv.executor.base import EngineSpec, EpisodeJob, WorkerContext
from openenv.executor.preflight import NodeNotReady, node_problems
from openenv.executor.sweep import OrphanSweep, end_processes, sweep_dead_workers, sweep_run_containers
from openenv.harness.sandbox.sweeper import RUN_ENV

__all__ = ["EpisodeWorker"]


def _node() -> tuple[str, str]:
    """This process's Ray node id and address (outside Ray: the hostname and loopback)."""
    try:
        import ray

        if ray.is_initialized():
            return ray.get_runtime_context().get_node_id(), ray.util.get_node_ip_address()
    except ImportError:
        pass
    return f"local:{socket.gethostname()}", "127.0.0.1"


class EpisodeWorker:
    """Runs jobs one at a time on this node.

    Args:
        run_id: the run's id; the worker's folder is `<artifacts>/<run_id>/<worker id>/`.
        engine: the engine every job of the run samples from (checked here, served per job spec).
        harnesses: the harness names the run uses (their CLIs are checked here).
        artifacts: the root folder for trajectories and sandboxes on this node.
        sandbox: the run's sandbox kind (`docker`: a Docker engine must answer on this node).

    Raises:
        NodeNotReady: the node lacks the tokenizer folder or a harness CLI, cannot reach the engine, or
            has no Docker engine for a Docker run.
    """

    def __init__(
        self,
        run_id: str,
        engine: EngineSpec,
        harnesses: Sequence[str],
        artifacts: str,
        sandbox: str = "local",
    ) -> None:
        from openenv.harness.sandbox.sweeper import owner_label

        self.node_id, self.node_ip = _node()
        problems = node_problems(engine, harnesses, sandbox)
        if problems:
            raise NodeNotReady(
                f"node {self.node_ip} ({self.node_id[:12]}) cannot run this run's episodes: "
                + "; ".join(problems)
            )
        self.owner = owner_label()
        self.folder = Path(artifacts) / run_id / f"worker-{os.getpid()}-{secrets.token_hex(3)}"
        self.tmp = self.folder / "tmp"
        self.tmp.mkdir(parents=True, exist_ok=True)
        # Every sandbox folder of this worker lands under its own temp folder: a sweep after its death
        # removes exactly these (tempfile.mkdtemp reads tempfile.tempdir first).
        os.environ["TMPDIR"] = str(self.tmp)
        tempfile.tempdir = str(self.tmp)
        # Docker sandboxes this worker makes carry the run id (`openenv.run`): swept with the run.
        os.environ[RUN_ENV] = run_id
        self.run_id = run_id
        self._pool = CapturePool()  # this worker's capture servers, one per spec; closed at shutdown
        self._cache: dict[str, Any] = {}
        self._lock = threading.Lock()

    def info(self) -> dict[str, str]:
        """Where this worker is: node id and address, owner label, folders (small; for the driver)."""
        return {
            "node_id": self.node_id,
            "node_ip": self.node_ip,
            "owner": self.owner,
            "folder": str(self.folder),
            "tmp": str(self.tmp),
            "pid": str(os.getpid()),
        }

    def run(self, job: EpisodeJob) -> Any:
        """Run one job next to this worker's proxy; its full trajectory goes under the worker's folder."""
        context = WorkerContext(
            capture=self._capture,
            artifacts=self.folder / "episodes",
            node_id=self.node_id,
            node_ip=self.node_ip,
            cache=self._cache,
        )
        return job.run(context)

    def read(self, path: str) -> bytes:
        """A file this worker wrote (a trajectory), for the driver to fetch on demand."""
        target = Path(path).resolve()
        if not target.is_relative_to(self.folder.parent.resolve()):
            raise PermissionError(f"{path} is not in this run's artifact folder")
        return target.read_bytes()

    def sweep(self, owners: list[tuple[str, str]]) -> OrphanSweep:
        """Remove what dead workers of the run left on this host (see `sweep.py`): their sandboxes'
        processes and folders, and the run's Docker sandboxes whose owner is dead."""
        return sweep_dead_workers(owners, run=self.run_id)

    def shutdown(self) -> None:
        """End this worker's sandboxes, local and Docker (an episode still running is cut short: the run
        is closing), stop its proxies and remove its sandbox temp folder (trajectories stay)."""
        from openenv.harness.sandbox.local import sandboxed_processes

        end_processes(sandboxed_processes())
        sweep_run_containers(self.run_id, owners=[self.owner])
        with self._lock:
            kept, self._cache = list(self._cache.values()), {}
        for thing in kept:
            close = getattr(thing, "close", None)
            if close is not None:
                close()
        self._pool.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def _capture(self, spec: EngineSpec) -> CaptureServer:
        spec.check_remote()
        return self._pool.acquire(spec)
