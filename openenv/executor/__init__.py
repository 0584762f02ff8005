"""Where episodes run: threads of this process, or `EpisodeWorker` actors across a Ray cluster.

    from openenv.executor import make_executor
    executor = make_executor("ray", address="auto", engine=EngineSpec(vllm_urls=(url,)), harnesses=["pi"])

See `base.py` for the seam and `cluster.py` for Ray (`pip install 'openenv-harness[ray]'`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from openenv.executor.base import (
    EngineSpec,
    EpisodeExecutor,
    EpisodeJob,
    ExecutorKind,
    ThreadExecutor,
    WorkerContext,
)

if TYPE_CHECKING:
    from openenv.capture.server import CaptureServer

__all__ = [
    "EngineSpec",
    "EpisodeExecutor",
    "EpisodeJob",
    "ExecutorKind",
    "ThreadExecutor",
    "WorkerContext",
    "make_executor",
]


def make_executor(
    kind: ExecutorKind,
    *,
    slots: int | None,
    engine: EngineSpec,
    harnesses: Sequence[str],
    address: str | None = "auto",
    capture: Callable[[EngineSpec], CaptureServer | None] | None = None,
    **ray_options: Any,
) -> EpisodeExecutor:
    """A thread executor with `slots` threads, or a Ray executor on the cluster at `address`.

    `capture` (threads only) returns the capture server the jobs share; `ray_options` go to `RayExecutor`.

    Raises:
        BadRequest: an unknown kind, Ray missing, or the `local` backend on Ray.
    """
    if kind == "thread":
        return ThreadExecutor(slots or 1, capture=capture)
    if kind == "ray":
        from openenv.executor.cluster import RayExecutor

        return RayExecutor(address, engine=engine, harnesses=harnesses, slots=slots, **ray_options)
    from openenv.errors import BadRequest

    raise BadRequest(f"executor must be 'thread' or 'ray', got {kind!r}")
