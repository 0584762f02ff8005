"""Orphan sweeper: remove the Docker containers, volumes, networks and images that dead openenv processes left.

Every object a `DockerSandbox` creates (and the workdir-extraction containers and graded commits beside
it) carries `openenv.sandbox=docker` and an owner label naming the host, pid and process start time of
its creator. An object whose creator on this host is gone is an orphan. Pulled images cannot carry a
label; `pulled.py` keeps their owners in a ledger and the sweep garbage-collects them too. A hard kill
(SIGKILL, OOM, a crashed trainer) skips `close()`, so the sweeper runs when the first sandbox of a
process starts, and on demand (`openenv sandbox sweep`).
"""

from __future__ import annotations

import os
import shutil
import socket
from collections.abc import Collection
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from openenv.harness.sandbox.owners import is_orphan, owner_label

if TYPE_CHECKING:
    import docker

__all__ = [
    "EPISODE_LABEL",
    "KIND_LABEL",
    "OWNER_LABEL",
    "ROOT_LABEL",
    "RUN_ENV",
    "RUN_LABEL",
    "SweepReport",
    "is_orphan",
    "owner_label",
    "run_labels",
    "sandbox_labels",
    "sweep",
]

KIND_LABEL = "openenv.sandbox"
OWNER_LABEL = "openenv.owner"
EPISODE_LABEL = "openenv.episode"
ROOT_LABEL = "openenv.root"  # the episode folder on the owner's host, removed with an orphan
ROOT_PREFIX = "openenv-docker-"
# The run a sandbox belongs to (a Ray run's id: `EpisodeWorker` sets the variable), so a run's sandboxes
# are found across its workers and removed with them, and never another run's.
RUN_LABEL = "openenv.run"
RUN_ENV = "OPENENV_RUN_ID"


class SweepReport(BaseModel):
    """What one sweep removed, by Docker object id (short)."""

    model_config = ConfigDict(extra="forbid")

    containers: list[str] = Field(default_factory=list)
    volumes: list[str] = Field(default_factory=list)
    networks: list[str] = Field(default_factory=list)
    folders: list[str] = Field(default_factory=list, description="episode folders removed on this host")
    images: list[str] = Field(default_factory=list, description="labelled images (graded commits) removed")
    pulled: list[str] = Field(default_factory=list, description="pulled images garbage-collected (pulled.py)")

    @property
    def total(self) -> int:
        return (
            len(self.containers)
            + len(self.volumes)
            + len(self.networks)
            + len(self.images)
            + len(self.pulled)
        )


def _remove_folder(labels: dict[str, str], report: SweepReport) -> None:
    root = Path(labels.get(ROOT_LABEL, ""))
    same_host = labels.get(OWNER_LABEL, "").partition("/")[0] == socket.gethostname()
    if same_host and root.name.startswith(ROOT_PREFIX) and root.is_dir():
        shutil.rmtree(root, ignore_errors=True)
        report.folders.append(str(root))


def sandbox_labels() -> dict[str, str]:
    """The labels of anything a sandbox makes in the engine: kind, owner and (in a run) the run."""
    return {KIND_LABEL: "docker", OWNER_LABEL: owner_label(), **run_labels()}


def run_labels() -> dict[str, str]:
    """The run label for a new sandbox: `{RUN_LABEL: $OPENENV_RUN_ID}`, or none outside a run."""
    run = os.environ.get(RUN_ENV)
    return {RUN_LABEL: run} if run else {}


def _doomed(labels: dict[str, str], everything: bool, owners: frozenset[str] = frozenset()) -> bool:
    owner = labels.get(OWNER_LABEL)
    return everything or owner in owners or is_orphan(owner)


def sweep(
    client: docker.DockerClient,
    *,
    everything: bool = False,
    run: str | None = None,
    owners: Collection[str] = (),
) -> SweepReport:
    """Remove orphaned openenv containers, then volumes and networks; `everything` removes all of ours.

    Args:
        client: a Docker SDK client.
        everything: remove every object labelled `openenv.sandbox`, live owners included, and every
            image openenv pulled (no keep budget).
        run: only objects of this run (`openenv.run`); others are not even looked at.
        owners: owner labels whose objects go although the owner lives (a Ray worker shutting down
            removes its own sandboxes; its episodes are being cut short).

    Returns:
        The ids removed. Objects that vanish mid-sweep (another sweeper, auto-remove) are skipped.
    """
    import docker.errors

    from openenv.harness.sandbox import pulled

    report = SweepReport()
    label = {"label": [KIND_LABEL, f"{RUN_LABEL}={run}"] if run else KIND_LABEL}
    mine = frozenset(owners)
    # sparse: the labels come with the listing itself. A full listing inspects each container after
    # listing it, and one that exits and auto-removes in between (a live episode elsewhere) raised.
    for container in client.containers.list(all=True, filters=label, sparse=True):
        labels = container.attrs.get("Labels") or {}
        if _doomed(labels, everything, mine):
            try:
                container.remove(force=True, v=True)
                report.containers.append(container.short_id)
                _remove_folder(labels, report)
            except docker.errors.NotFound:
                continue
            except docker.errors.APIError as exc:
                if exc.status_code != 409:  # 409: removal already in progress (auto-remove)
                    raise
    for volume in client.volumes.list(filters=label):
        if _doomed(volume.attrs.get("Labels") or {}, everything, mine):
            try:
                volume.remove(force=True)
                report.volumes.append(volume.short_id)
            except docker.errors.NotFound:
                continue
    for network in client.networks.list(filters=label):
        if _doomed(network.attrs.get("Labels") or {}, everything, mine):
            try:
                network.remove()
                report.networks.append(network.short_id)
            except docker.errors.NotFound:
                continue
    for image in client.images.list(filters=label):
        if _doomed(image.labels or {}, everything, mine):
            try:
                client.images.remove(image.id, force=True)
                report.images.append(image.short_id)
            except (docker.errors.NotFound, docker.errors.APIError):
                continue  # gone already, or a live container still runs from it
    report.pulled = pulled.collect(client, everything=everything, leaving=mine)
    return report
