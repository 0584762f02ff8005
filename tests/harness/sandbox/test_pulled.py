"""Pulled images are garbage-collected when no live run uses them: at a clean exit, after a kill (the next
sweep), down to the keep budget; one a live run uses stays. Real pulls from a registry on 127.0.0.1."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import tarfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import docker
import pytest

from openenv.harness.sandbox import pulled
from openenv.harness.sandbox.pull import ensure_image
from openenv.harness.sandbox.sweeper import owner_label, sweep
from openenv.testing.registry import LoopbackRegistry

REPO = Path(__file__).resolve().parents[3]
_PULLER = """
import sys, time, docker
from openenv.harness.sandbox.pull import ensure_image
ensure_image(docker.from_env(), sys.argv[1], policy="missing", progress=lambda line: None)
print("pulled", flush=True)
if sys.argv[2] == "stay":
    time.sleep(120)
"""


@pytest.fixture(autouse=True)
def own_ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENENV_LOCK_DIR", str(tmp_path / "locks"))
    monkeypatch.setenv("OPENENV_PULLED_DIR", str(tmp_path / "pulled"))
    monkeypatch.setenv("OPENENV_PULLED_KEEP_GB", "0")


@pytest.fixture
def engine() -> Iterator[docker.DockerClient]:
    from openenv.harness.sandbox.docker import engine_available

    if (reason := engine_available()) is not None:
        pytest.skip(reason)
    client = docker.from_env()
    yield client
    client.close()


@pytest.fixture
def pushed(engine: docker.DockerClient, loopback_registry: LoopbackRegistry) -> Iterator[Callable[[], str]]:
    """A new one-file image on the loopback registry and not in the engine: its reference."""
    made: list[str] = []

    def make() -> str:
        name = f"openenv-test/gc-{uuid.uuid4().hex[:10]}"
        data = io.BytesIO()
        with tarfile.open(fileobj=data, mode="w") as archive:
            info = tarfile.TarInfo("id.txt")
            info.size = len(name)
            archive.addfile(info, io.BytesIO(name.encode()))
        engine.api.import_image_from_data(data.getvalue(), repository=name, tag="1")
        reference = loopback_registry.push(f"{name}:1", f"{name}:1")
        engine.images.remove(reference)
        engine.images.remove(f"{name}:1")
        made.append(reference)
        return reference

    yield make
    for reference in made:
        try:
            engine.images.remove(reference, force=True)
        except docker.errors.ImageNotFound:
            pass


def _present(engine: docker.DockerClient, reference: str) -> bool:
    try:
        engine.images.get(reference)
        return True
    except docker.errors.ImageNotFound:
        return False


def _puller(reference: str, mode: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-c", _PULLER, reference, mode], stdout=subprocess.PIPE, text=True, env=env
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "pulled"
    return proc


def test_a_run_that_ends_collects_the_images_it_pulled(
    engine: docker.DockerClient, pushed: Callable[[], str]
) -> None:
    reference = pushed()
    proc = _puller(reference, "exit")
    assert proc.wait(timeout=60) == 0
    assert not _present(engine, reference)
    assert pulled.entries() == []


def test_a_killed_run_s_images_go_with_the_next_sweep_and_a_live_run_s_stay(
    engine: docker.DockerClient, pushed: Callable[[], str]
) -> None:
    killed, alive = pushed(), pushed()
    victim = _puller(killed, "stay")
    survivor = _puller(alive, "stay")
    try:
        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=30)
        assert _present(engine, killed)  # no exit hook ran
        report = sweep(engine)
        assert report.pulled == [killed]
        assert not _present(engine, killed) and _present(engine, alive)
        assert [e["reference"] for e in pulled.entries()] == [alive]
    finally:
        survivor.kill()
        survivor.wait(timeout=30)
    assert sweep(engine).pulled == [alive]


def test_the_keep_budget_keeps_idle_images_as_a_cache(
    engine: docker.DockerClient, pushed: Callable[[], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    reference = pushed()
    ensure_image(engine, reference, policy="missing", progress=lambda _: None)
    monkeypatch.setenv("OPENENV_PULLED_KEEP_GB", "5")
    assert pulled.collect(engine, leaving=[owner_label()]) == []  # idle, but within the budget
    assert _present(engine, reference)
    assert pulled.collect(engine, everything=True) == [reference]  # `sweep --all`
    assert not _present(engine, reference)


def test_an_image_that_was_already_there_is_not_the_runs_to_collect(
    engine: docker.DockerClient, pushed: Callable[[], str]
) -> None:
    reference = pushed()
    engine.images.pull(reference)  # the user's own pull
    assert ensure_image(engine, reference, policy="missing", progress=lambda _: None) is None
    assert pulled.entries() == []
    assert pulled.collect(engine, everything=True) == []
    assert _present(engine, reference)


def test_the_ledger_holds_a_pending_entry_during_the_pull_and_completes_it_after(
    engine: docker.DockerClient, pushed: Callable[[], str]
) -> None:
    reference = pushed()
    during: list[list[dict[str, object]]] = []
    ensure_image(engine, reference, policy="missing", progress=lambda _: during.append(pulled.entries()))
    assert during, "the pull reported progress"
    # Entered before the pull: a process that finds the image mid-pull is counted as a user of it.
    first = during[0]
    assert [(e["reference"], e["state"], e["owners"]) for e in first] == [
        (reference, "pending", [owner_label()])
    ]
    assert "image_id" not in first[0]
    (done,) = pulled.entries()
    assert done["state"] == "pulled"
    assert done["image_id"] == engine.images.get(reference).id and int(done["size"]) > 0


def test_a_failed_pull_leaves_no_entry(
    engine: docker.DockerClient, loopback_registry: LoopbackRegistry
) -> None:
    from openenv.errors import EnvError

    missing = f"{loopback_registry.host}/openenv-test/never-pushed-{uuid.uuid4().hex[:8]}:1"
    with pytest.raises(EnvError):
        ensure_image(engine, missing, policy="missing", progress=lambda _: None)
    assert pulled.entries() == []


_CLAIMER = """
import sys, time
from openenv.harness.sandbox import pulled
from openenv.harness.sandbox.owners import owner_label
pulled.claim(sys.argv[1])
print(owner_label(), flush=True)
time.sleep(120)
"""


@pytest.fixture
def claimer() -> Iterator[Callable[[str], str]]:
    """Starts a live process that claims a reference; returns its owner label once the claim is in."""
    started: list[subprocess.Popen[str]] = []

    def claim(reference: str) -> str:
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        proc = subprocess.Popen(
            [sys.executable, "-c", _CLAIMER, reference], stdout=subprocess.PIPE, text=True, env=env
        )
        started.append(proc)
        assert proc.stdout is not None
        return proc.stdout.readline().strip()

    yield claim
    for proc in started:
        proc.kill()
        proc.wait()


def test_a_claim_made_while_a_collector_runs_is_not_written_over(
    engine: docker.DockerClient, claimer: Callable[[str], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The collector lists the ledger, then rewrites each entry: a run that claimed the image in between
    must stay its user, or the collector removes the image under it (seen in CI: four processes, one
    exiting, one of the others not counted)."""
    reference = f"127.0.0.1:9/openenv-test/claimed-{uuid.uuid4().hex[:8]}:1"  # never pulled
    pulled.record(engine, reference)  # this process pulled it, and is leaving
    listed = pulled.entries()  # what the collector read, before the claim below
    label = claimer(reference)
    assert label in pulled.entries()[0]["owners"]
    with monkeypatch.context() as patched:
        patched.setattr(pulled, "entries", lambda: listed)
        assert pulled.collect(engine, leaving=(owner_label(),)) == []
    (entry,) = pulled.entries()
    assert entry["owners"] == [label]


def test_a_claim_made_after_the_collector_chose_the_image_keeps_it(
    engine: docker.DockerClient, claimer: Callable[[str], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between choosing the idle images and removing them, a run can claim one: it is checked again."""
    reference = f"127.0.0.1:9/openenv-test/claimed-{uuid.uuid4().hex[:8]}:1"
    pulled.record(engine, reference)
    labels: list[str] = []

    def budget_read_after_the_choice(everything: bool) -> int:
        labels.append(claimer(reference))
        return 0

    monkeypatch.setattr(pulled, "_keep_bytes", budget_read_after_the_choice)
    assert pulled.collect(engine, leaving=(owner_label(),)) == []
    (entry,) = pulled.entries()
    assert entry["owners"] == labels
