"""The orphan sweeper: who counts as an orphan, and a dead owner's container removed from a real engine."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import docker
import psutil

from openenv.harness.sandbox.docker import DockerSandbox
from openenv.harness.sandbox.sweeper import is_orphan, owner_label, sweep

REPO = Path(__file__).resolve().parents[3]


def test_the_owner_label_names_this_host_pid_and_start_time() -> None:
    host, pid, started = owner_label().split("/")
    assert (host, int(pid)) == (socket.gethostname(), psutil.Process().pid)
    assert float(started) == round(psutil.Process().create_time(), 2)


def test_a_live_owner_is_not_an_orphan_and_a_dead_or_reused_pid_is() -> None:
    assert not is_orphan(owner_label())
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    label = owner_label(child.pid) if child.poll() is None else f"{socket.gethostname()}/{child.pid}/0.00"
    child.wait()
    assert is_orphan(label)
    host, pid, _ = owner_label().split("/")
    assert is_orphan(f"{host}/{pid}/12.34")  # this pid, but another process's start time: reused
    assert is_orphan(None)


def test_owners_on_another_host_are_never_orphans_here() -> None:
    assert not is_orphan("some-other-host/1/0.00")


_ORPHAN_MAKER = """
import sys
from openenv.harness.sandbox.docker import DockerSandbox
box = DockerSandbox()
print(box.container.id, flush=True)
sys.stdin.read()
"""


def test_the_sweeper_removes_containers_of_a_dead_owner_and_spares_live_ones(
    sandbox: DockerSandbox, client: docker.DockerClient, ours: Callable[[], list[str]]
) -> None:
    owner = subprocess.Popen(
        [sys.executable, "-c", _ORPHAN_MAKER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    assert owner.stdout is not None
    orphan = owner.stdout.readline().strip()
    owner.kill()  # SIGKILL: no close(), no atexit
    owner.wait()
    assert client.containers.get(orphan).status == "running"
    report = sweep(client)
    assert report.containers == [orphan[:12]]
    assert report.folders and not Path(report.folders[0]).exists()
    assert sandbox.container.short_id in ours()
    assert sandbox.run(["true"]).exit_code == 0


def test_a_sweep_survives_containers_vanishing_while_it_lists_them(client: docker.DockerClient) -> None:
    """Sandboxes of live episodes exit and auto-remove while another process's first sandbox sweeps.
    A container listed and then gone before it is looked at must be skipped, never raise."""
    from concurrent.futures import ThreadPoolExecutor

    from openenv.harness.sandbox.docker import DEFAULT_IMAGE
    from openenv.harness.sandbox.sweeper import KIND_LABEL, OWNER_LABEL

    dead = f"{socket.gethostname()}/{2**22 + 7}/0.00"  # above pid_max's default: never a live owner
    labels = {KIND_LABEL: "docker", OWNER_LABEL: dead, "openenv.test": "vanishing"}
    made = [client.containers.create(DEFAULT_IMAGE, ["true"], labels=labels).id for _ in range(24)]

    def vanish(cid: str) -> None:
        try:
            client.api.remove_container(cid, force=True)
        except docker.errors.APIError as exc:  # NotFound or 409: the sweep got there first
            assert exc.status_code in (404, 409), exc

    removed: list[str] = []
    with ThreadPoolExecutor(max_workers=4) as pool:
        gone = pool.map(vanish, made)
        for _ in range(6):
            removed += sweep(client).containers
        list(gone)
    left = client.containers.list(all=True, sparse=True, filters={"label": "openenv.test=vanishing"})
    assert left == []
    assert set(removed) <= {cid[:12] for cid in made}


def test_a_run_sweep_takes_that_runs_dead_owners_and_named_live_owners_and_nothing_else(
    client: docker.DockerClient, monkeypatch: object
) -> None:
    """What a Ray worker does at shutdown (`owners=[itself]`) and for a dead worker of its run."""
    import uuid

    from openenv.harness.sandbox.docker import DEFAULT_IMAGE
    from openenv.harness.sandbox.sweeper import KIND_LABEL, OWNER_LABEL, RUN_ENV, RUN_LABEL, run_labels

    run, other = f"run-{uuid.uuid4().hex[:8]}", f"run-{uuid.uuid4().hex[:8]}"
    dead, live = f"{socket.gethostname()}/{2**22 + 9}/0.00", owner_label()
    named = owner_label(psutil.Process().ppid())  # alive too, but the sweep is told to take its containers

    def make(run_id: str, owner: str) -> str:
        labels = {KIND_LABEL: "docker", OWNER_LABEL: owner, RUN_LABEL: run_id}
        return client.containers.create(DEFAULT_IMAGE, ["true"], labels=labels).id[:12]

    dead_mine, named_mine, live_mine, dead_other = (
        make(run, dead),
        make(run, named),
        make(run, live),
        make(other, dead),
    )
    try:
        report = sweep(client, run=run, owners=[named])
        assert sorted(report.containers) == sorted([dead_mine, named_mine])
        left = {
            c.short_id for c in client.containers.list(all=True, sparse=True, filters={"label": KIND_LABEL})
        }
        assert {live_mine, dead_other} <= left
    finally:
        for cid in (live_mine, dead_other):
            client.api.remove_container(cid, force=True)
    monkeypatch.setenv(RUN_ENV, run)  # type: ignore[attr-defined]
    assert run_labels() == {RUN_LABEL: run}
    monkeypatch.delenv(RUN_ENV)  # type: ignore[attr-defined]
    assert run_labels() == {}


def test_the_sweeper_removes_labelled_images_of_a_dead_owner_and_spares_live_ones(
    client: docker.DockerClient,
) -> None:
    """A graded commit (or any image a sandbox makes) outlives a killed owner; the next sweep removes it."""
    import io
    import tarfile
    import uuid

    from openenv.harness.sandbox.sweeper import KIND_LABEL, OWNER_LABEL

    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w") as archive:
        archive.addfile(tarfile.TarInfo("empty"), io.BytesIO(b""))
    dead = f"{socket.gethostname()}/{2**22 + 7}/1.00"  # above pid_max's default: never a live process
    made = {}
    for who, owner in (("dead", dead), ("live", owner_label())):
        name = f"openenv-test/graded-{who}-{uuid.uuid4().hex[:8]}"
        client.api.import_image_from_data(
            data.getvalue(),
            repository=name,
            tag="latest",
            changes=[f"LABEL {KIND_LABEL}=docker", f"LABEL {OWNER_LABEL}={owner}"],
        )
        made[who] = client.images.get(f"{name}:latest")
    try:
        report = sweep(client)
        assert made["dead"].short_id in report.images and made["live"].short_id not in report.images
        assert not client.images.list(name=made["dead"].tags[0].split(":")[0])
        assert client.images.get(made["live"].id)
    finally:
        client.images.remove(made["live"].id, force=True)
