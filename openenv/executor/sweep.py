"""Sweeping what a dead `EpisodeWorker` left behind: its sandboxes' processes and folders.

A worker that dies mid-episode (node lost, actor killed, OOM) never runs `close()`: the harness it
started keeps running, in its own process group, and its sandbox folder stays on disk. Each worker
records an owner label (`host/pid/start-time`) and keeps every sandbox folder under its own temp folder,
so whoever sweeps later (another worker of the run on the same host, or the driver's sweep at close)
knows exactly what was the dead worker's, and leaves live workers' sandboxes alone.
"""

from __future__ import annotations

import shutil
import socket
from collections.abc import Sequence
from pathlib import Path

import psutil
from pydantic import BaseModel, ConfigDict, Field

from openenv.harness.sandbox.local import sandboxed_processes
from openenv.harness.sandbox.sweeper import is_orphan

__all__ = ["OrphanSweep", "end_processes", "sweep_dead_workers", "sweep_run_containers"]


class OrphanSweep(BaseModel):
    """What one host's sweep removed."""

    model_config = ConfigDict(extra="forbid")

    host: str
    processes: list[int] = Field(default_factory=list)
    folders: list[str] = Field(default_factory=list)
    containers: list[str] = Field(default_factory=list, description="Docker sandboxes of the run removed")


def sweep_dead_workers(
    owners: Sequence[tuple[str, str]], *, grace_s: float = 1.0, run: str | None = None
) -> OrphanSweep:
    """Kill the sandbox processes and remove the temp folders of dead workers on this host; with `run`,
    also the run's Docker sandboxes whose owner is dead (a dead worker's, wherever its episode was).

    Args:
        owners: `(owner label, temp folder)` of workers; those on other hosts or still alive are skipped.
        grace_s: how long SIGTERM gets before SIGKILL.
        run: the run id its Docker sandboxes are labelled with.
    """
    report = OrphanSweep(host=socket.gethostname())
    if run is not None:
        report.containers = sweep_run_containers(run)
    doomed: list[psutil.Process] = []
    for owner, folder in owners:
        host, _, rest = owner.partition("/")
        if host != report.host or not is_orphan(owner):
            continue
        doomed += sandboxed_processes(int(rest.partition("/")[0]))
        if folder and Path(folder).is_dir():
            report.folders.append(folder)
    end_processes(doomed, grace_s=grace_s)
    for folder in report.folders:  # after the kills: a live harness could still write into it
        shutil.rmtree(folder, ignore_errors=True)
    report.processes = sorted(p.pid for p in doomed)
    return report


def end_processes(procs: Sequence[psutil.Process], *, grace_s: float = 1.0) -> None:
    """SIGTERM, `grace_s` to exit, then SIGKILL for whoever is left."""
    for proc in procs:
        try:
            proc.terminate()
        except psutil.NoSuchProcess:
            continue
    _, alive = psutil.wait_procs(list(procs), timeout=grace_s)
    for proc in alive:
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            continue


def sweep_run_containers(run: str, owners: Sequence[str] = ()) -> list[str]:
    """Remove run `run`'s Docker sandboxes on this host's engine whose owner is dead or in `owners`.

    Returns the container ids removed; nothing (and no error) where Docker is not installed or no engine
    answers: a run on local sandboxes has nothing there to sweep.
    """
    try:
        import docker
    except ImportError:
        return []
    from openenv.harness.sandbox.sweeper import sweep

    try:
        client = docker.from_env()
    except docker.errors.DockerException:
        return []
    try:
        return sweep(client, run=run, owners=owners).containers
    except docker.errors.DockerException:
        return []
    finally:
        client.close()
