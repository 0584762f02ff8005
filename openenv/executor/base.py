"""The executor seam: where the episodes of a rollout, an eval or a soak run.

Everything that runs many episodes hands each one to an executor as an `EpisodeJob`, a small picklable
description of one episode (harness, task, policy, sampling, which engine) with a `run(context)` method.
The executor decides *where* it runs: `ThreadExecutor` on a thread of this process (one shared capture
server), `RayExecutor` (`openenv.executor.cluster`) on an `EpisodeWorker` actor somewhere in a Ray
cluster, next to that worker's own capture server and sandbox. The driver keeps everything else: group
planning, harness mixes, retry-or-mask and staleness never travel, so both executors give the same
groups, the same retries and (for deterministic policies) the same tokens.

A job whose worker died mid-episode comes back as `job.lost(reason)`: a failed result the driver's
existing failure policy retries, never an exception that sinks the batch.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from openenv.capture.engine import EngineSpec
from openenv.errors import BadRequest

if TYPE_CHECKING:
    from openenv.capture.server import CaptureServer

__all__ = ["EngineSpec", "EpisodeExecutor", "EpisodeJob", "ExecutorKind", "ThreadExecutor", "WorkerContext"]

ExecutorKind = Literal["thread", "ray"]


@dataclass
class WorkerContext:
    """What a job may use where it runs.

    Args:
        capture: the capture server for an `EngineSpec` (the worker's own on Ray; on threads whatever the
            caller shares, or None to let the environment use the process's shared server).
        artifacts: a folder for this worker's full trajectories (None: the job's own default).
        node_id: the Ray node id (threads: `local:<hostname>`).
        node_ip: the node's address.
        cache: objects a job keeps for the later jobs of the same worker (a soak slot); the worker closes
            each one that has `close()` when it shuts down.
    """

    capture: Callable[[EngineSpec], CaptureServer | None] = field(default=lambda _spec: None)
    artifacts: Path | None = None
    node_id: str = field(default_factory=lambda: f"local:{socket.gethostname()}")
    node_ip: str = "127.0.0.1"
    cache: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class EpisodeJob(Protocol):
    """One episode, described small enough to pickle; the result must be small too (the object store).

    `run` never raises for an episode that failed: it returns a failed result. `lost` builds that
    failed result when the worker running the job died (node lost, actor killed).
    """

    label: str

    def run(self, context: WorkerContext) -> Any: ...

    def lost(self, reason: str) -> Any: ...


@runtime_checkable
class EpisodeExecutor(Protocol):
    """Runs jobs somewhere; `submit` returns at once with a future of `job.run`'s result."""

    kind: ExecutorKind
    slots: int

    def submit(self, job: EpisodeJob) -> Future[Any]: ...

    def fetch(self, result_node: str, path: str) -> bytes:
        """The bytes of a file a job wrote on node `result_node` (a full trajectory), fetched on demand."""
        ...

    def close(self) -> None: ...


class ThreadExecutor:
    """Today's behaviour: each job on a thread of this process, all sharing one capture server.

    Args:
        slots: episodes at once.
        capture: returns the capture server the jobs share (None: each environment's default).
    """

    kind: ExecutorKind = "thread"

    def __init__(
        self, slots: int, *, capture: Callable[[EngineSpec], CaptureServer | None] | None = None
    ) -> None:
        if slots < 1:
            raise BadRequest(f"an executor needs at least 1 slot, got {slots}")
        self.slots = slots
        self._context = WorkerContext(capture=capture or (lambda _spec: None))
        self._pool = ThreadPoolExecutor(max_workers=slots, thread_name_prefix="episode")

    def submit(self, job: EpisodeJob) -> Future[Any]:
        return self._pool.submit(job.run, self._context)

    def fetch(self, result_node: str, path: str) -> bytes:
        return Path(path).read_bytes()

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
