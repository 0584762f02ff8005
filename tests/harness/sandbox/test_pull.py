"""Task images from a registry (a real `docker-registry` on 127.0.0.1): a Harbor task naming an image the
engine lacks is pulled and solved by the oracle in the Docker sandbox; `--pull never` refuses it; eight
episodes starting together on a new image make one pull and one build; a pull the registry refuses or
cannot answer is an error naming the image and the answer; the engine's own login is used."""

from __future__ import annotations

import base64
import io
import json
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import docker
import pytest

from openenv.errors import EnvError
from openenv.harness.sandbox import pulled
from openenv.harness.sandbox.docker_episode import sandbox_factory
from openenv.harness.sandbox.images import OFFLINE_BASE
from openenv.harness.sandbox.pull import PullProgress, split_reference
from openenv.harness.solution import apply_solution
from openenv.harness.tasks import load_harbor_task
from openenv.harness.verifier import verify
from openenv.testing.registry import LoopbackRegistry

SOLVE = "#!/bin/sh\nprintf 'def answer():\\n    return 42\\n' > /app/answer.py\n"
TEST = """#!/bin/sh
cd /app
nonce=$(cat /etc/task-image-nonce 2>/dev/null)
if [ "$nonce" = "{nonce}" ] && python3 -c 'from answer import answer; assert answer() == 42'; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
"""


@pytest.fixture(autouse=True)
def own_ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """This test's locks and pulled-image ledger, apart from the user's and other tests'."""
    monkeypatch.setenv("OPENENV_LOCK_DIR", str(tmp_path / "locks"))
    monkeypatch.setenv("OPENENV_PULLED_DIR", str(tmp_path / "pulled"))
    monkeypatch.delenv("OPENENV_PULL", raising=False)
    monkeypatch.delenv("OPENENV_IMAGE_SUBSTITUTES", raising=False)


def _build(client: docker.DockerClient, tag: str, nonce: str) -> None:
    dockerfile = (
        f"FROM {OFFLINE_BASE}\nUSER root\nRUN echo {nonce} > /etc/task-image-nonce && mkdir -p /app "
        "&& printf 'def answer():\\n    return 0\\n' > /app/answer.py\nWORKDIR /app\n"
    )
    client.images.build(
        fileobj=io.BytesIO(dockerfile.encode()), tag=tag, pull=False, network_mode="none", rm=True
    )


@pytest.fixture
def registry_image(
    client: docker.DockerClient, loopback_registry: LoopbackRegistry
) -> Iterator[Callable[..., tuple[str, str]]]:
    """Makes a new image, pushes it to the loopback registry and removes it from the engine: (reference, nonce)."""
    made: list[str] = []

    def make(registry: LoopbackRegistry = loopback_registry) -> tuple[str, str]:
        nonce = uuid.uuid4().hex[:12]
        local = f"openenv-test/pull-src-{nonce}:1"
        _build(client, local, nonce)
        reference = registry.push(local, f"tasks/pull-{nonce}:1")
        client.images.remove(reference)
        client.images.remove(local)
        made.append(reference)
        return reference, nonce

    yield make
    for reference in made:
        try:
            client.images.remove(reference, force=True)
        except docker.errors.ImageNotFound:
            pass


def _task(folder: Path, image: str, nonce: str) -> Path:
    folder.mkdir(parents=True)
    (folder / "task.toml").write_text(
        f'schema_version = "1.4"\n\n[environment]\ndocker_image = "{image}"\n\n'
        "[verifier]\ntimeout_sec = 60.0\n"
    )
    (folder / "instruction.md").write_text("Make answer() in /app/answer.py return 42.\n")
    (folder / "tests").mkdir()
    (folder / "tests" / "test.sh").write_text(TEST.format(nonce=nonce))
    (folder / "solution").mkdir()
    (folder / "solution" / "solve.sh").write_text(SOLVE)
    return folder


def _events(client: docker.DockerClient, since: float, action: str) -> list[str]:
    """The engine's own record: the image events of kind `action` since `since` (a pull's id is the
    reference pulled; a tag's name attribute is the tag given)."""
    found = client.events(
        since=int(since) - 1,
        until=int(time.time()) + 1,
        decode=True,
        filters={"type": "image", "event": action},
    )
    key = "id" if action == "pull" else "name"
    return [
        str(e.get("id") if key == "id" else e.get("Actor", {}).get("Attributes", {}).get("name"))
        for e in found
    ]


def test_a_task_naming_a_registry_image_is_pulled_and_solved_by_the_oracle(
    client: docker.DockerClient, registry_image: Callable[..., tuple[str, str]], tmp_path: Path
) -> None:
    reference, nonce = registry_image()
    task = load_harbor_task(_task(tmp_path / "task", reference, nonce))
    notes: list[str] = []
    lines: list[str] = []
    from openenv.harness.sandbox import images

    image, built, _ = images.task_image(client, task, progress=lines.append)
    assert (image, built) == (reference, True)
    assert lines[0] == f"pulling {reference}" and lines[-1].startswith(f"pulled {reference} (sha256:")
    with sandbox_factory(task, client=client, notes=notes)(()) as box:
        assert box.workspace_ready  # the image's /app is the starting workspace
        before = verify(box, task)
    assert (before.status, before.reward) == ("scored", 0.0), before
    with sandbox_factory(task, client=client, notes=notes)(()) as box:
        assert apply_solution(box, task).exit_code == 0
        after = verify(box, task)
    assert (after.status, after.reward) == ("scored", 1.0), after
    assert [e["reference"] for e in pulled.entries()] == [reference]  # recorded for garbage collection


def test_pull_never_refuses_a_missing_image_with_the_ways_out(
    client: docker.DockerClient,
    registry_image: Callable[..., tuple[str, str]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reference, nonce = registry_image()
    task = load_harbor_task(_task(tmp_path / "task", reference, nonce))
    with pytest.raises(EnvError) as refused:
        sandbox_factory(task, client=client, pull="never")
    message = refused.value.message
    assert reference in message and "pulling is off (--pull never" in message
    assert (
        "--pull missing" in message
        and f"docker pull {reference}" in message
        and "--image-substitute" in message
    )
    monkeypatch.setenv("OPENENV_PULL", "never")
    with pytest.raises(EnvError, match="pulling is off"):
        sandbox_factory(task, client=client)
    with pytest.raises(docker.errors.ImageNotFound):
        client.images.get(reference)


def test_a_pinned_digest_is_pulled_by_digest(
    client: docker.DockerClient,
    registry_image: Callable[..., tuple[str, str]],
    loopback_registry: LoopbackRegistry,
    tmp_path: Path,
) -> None:
    reference, nonce = registry_image()
    repository, tag = split_reference(reference)
    digest = loopback_registry.digest(reference.split("/", 1)[1])
    pinned = f"{repository}@{digest}"
    task = load_harbor_task(_task(tmp_path / "task", pinned, nonce))
    from openenv.harness.sandbox import images

    try:
        assert images.task_image(client, task, progress=lambda _: None)[0] == pinned
        assert pinned in client.images.get(pinned).attrs["RepoDigests"]
        with pytest.raises(docker.errors.ImageNotFound):
            client.images.get(reference)  # the tag was never asked for
    finally:
        client.images.remove(pinned, force=True)


def test_eight_first_episodes_of_a_new_image_make_one_pull_and_one_build(
    client: docker.DockerClient,
    registry_image: Callable[..., tuple[str, str]],
    loopback_registry: LoopbackRegistry,
    tmp_path: Path,
) -> None:
    reference, nonce = registry_image()
    folder = _task(tmp_path / "task", reference, nonce)
    (folder / "environment").mkdir()
    (folder / "environment" / "Dockerfile").write_text(f"FROM {reference}\nRUN echo built > /app/built.txt\n")
    (folder / "task.toml").write_text('schema_version = "1.4"\n')  # built FROM the registry image
    task = load_harbor_task(folder)
    assert task.needs_build() and task.base_image == reference
    repository = reference.split("/", 1)[1].rsplit(":", 1)[0]
    manifests = loopback_registry.requests("GET", f"/v2/{repository}/manifests/")
    since = time.time()
    notes: list[list[str]] = [[] for _ in range(8)]

    def episode(i: int) -> str:
        sandbox_factory(task, client=client, notes=notes[i])  # resolves the image: pull, then build
        return "ok"

    with ThreadPoolExecutor(8) as pool:
        assert list(pool.map(episode, range(8))) == ["ok"] * 8
    assert loopback_registry.requests("GET", f"/v2/{repository}/manifests/") == manifests + 1
    # this image's pulls only: the window starts a second early (the engine's clock), so a pull the test
    # before made can be in it
    assert [r for r in _events(client, since, "pull") if repository in r] == [reference]
    built = [name for name in _events(client, since, "tag") if name.startswith("openenv/task-")]
    assert len(built) == 1, built
    said = [line for n in notes for line in n]
    assert said and all(line.startswith(f"image {reference} pulled (sha256:") for line in said)
    client.images.remove(built[0], force=True)


_PULL_IN_A_PROCESS = """
import sys, time
from pathlib import Path
import docker
from openenv.harness.sandbox import pulled
from openenv.harness.sandbox.pull import ensure_image
from openenv.harness.sandbox.sweeper import owner_label
folder, reference = Path(sys.argv[1]), sys.argv[2]
(folder / f"ready-{sys.argv[3]}").touch()
while not (folder / "go").exists():
    time.sleep(0.01)
note = ensure_image(docker.from_env(), reference, policy="missing", progress=lambda line: None)
print(f"{note}|user={owner_label() in pulled.entries()[0]['owners']}")
"""


def test_four_processes_starting_on_a_new_image_make_one_pull(
    client: docker.DockerClient,
    registry_image: Callable[..., tuple[str, str]],
    loopback_registry: LoopbackRegistry,
    tmp_path: Path,
) -> None:
    """Ray workers of one node, say: the file lock makes them share the pull."""
    import os
    import subprocess
    import sys

    reference, _ = registry_image()
    repository = reference.split("/", 1)[1].rsplit(":", 1)[0]
    manifests = loopback_registry.requests("GET", f"/v2/{repository}/manifests/")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _PULL_IN_A_PROCESS, str(tmp_path), reference, str(i)],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for i in range(4)
    ]
    deadline = time.monotonic() + 120
    while len(list(tmp_path.glob("ready-*"))) < 4 and time.monotonic() < deadline:
        time.sleep(0.05)
    (tmp_path / "go").touch()
    said = sorted(p.communicate(timeout=120)[0].strip() for p in procs)
    assert loopback_registry.requests("GET", f"/v2/{repository}/manifests/") == manifests + 1
    assert said.count("None|user=True") == 3 and said[-1].startswith(f"image {reference} pulled (sha256:"), (
        said
    )
    assert said[-1].endswith("|user=True")  # every process that used it is its user, so a collector spares it
    from openenv.harness.sandbox.sweeper import is_orphan

    (entry,) = pulled.entries()
    assert entry["reference"] == reference and all(is_orphan(o) for o in entry["owners"])  # all gone: idle


def test_an_unreachable_registry_is_an_error_naming_the_image_and_the_answer(
    client: docker.DockerClient, tmp_path: Path
) -> None:
    from openenv.core.net import free_port

    reference = f"127.0.0.1:{free_port()}/tasks/gone:1"  # nothing listens there
    task = load_harbor_task(_task(tmp_path / "task", reference, "x"))
    with pytest.raises(EnvError) as failed:
        sandbox_factory(task, client=client)
    message = failed.value.message
    assert f"pulling image {reference} failed" in message and "connection refused" in message
    assert pulled.entries() == []


def test_the_engines_login_is_used_and_a_pull_without_one_fails_with_the_registrys_answer(
    client: docker.DockerClient,
    registry_image: Callable[..., tuple[str, str]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with LoopbackRegistry(tmp_path / "private", login=("trainer", "hunter2")) as private:
        reference, nonce = registry_image(private)
        task = load_harbor_task(_task(tmp_path / "task", reference, nonce))
        monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "no-login"))
        with pytest.raises(
            EnvError, match=f"pulling image {reference} failed: .*(no basic auth|unauthorized)"
        ):
            sandbox_factory(task, client=docker.from_env())
        config = tmp_path / "docker-config"
        config.mkdir()
        auth = base64.b64encode(b"trainer:hunter2").decode()
        (config / "config.json").write_text(json.dumps({"auths": {private.host: {"auth": auth}}}))
        monkeypatch.setenv("DOCKER_CONFIG", str(config))  # what `docker login` writes
        engine = docker.from_env()
        notes: list[str] = []
        sandbox_factory(task, client=engine, notes=notes)
        assert notes and notes[0].startswith(f"image {reference} pulled")
        engine.close()


def test_pull_progress_reports_layers_and_bytes_and_the_digest() -> None:
    lines: list[str] = []
    watch = PullProgress("r/x:1", lines.append, every_s=0.0)
    for chunk in [
        {"status": "Pulling fs layer", "id": "a"},
        {"status": "Pulling fs layer", "id": "b"},
        {"status": "Downloading", "id": "a", "progressDetail": {"current": 1_000_000, "total": 4_000_000}},
        {"status": "Downloading", "id": "b", "progressDetail": {"current": 2_000_000, "total": 2_000_000}},
        {"status": "Pull complete", "id": "b"},
        {"status": "Digest: sha256:abc"},
    ]:
        watch.feed(chunk)
    assert lines[-1].startswith("pulling r/x:1: 1 of 2 layers done, 3.0 of 6.0 MB fetched")
    assert watch.digest == "sha256:abc"


def test_references_split_as_docker_reads_them() -> None:
    assert split_reference("127.0.0.1:5000/x/y:1") == ("127.0.0.1:5000/x/y", "1")
    assert split_reference("127.0.0.1:5000/x/y") == ("127.0.0.1:5000/x/y", "latest")
    assert split_reference("x/y:1@sha256:ab") == ("x/y", "sha256:ab")
    assert split_reference("ubuntu") == ("ubuntu", "latest")


# ---- whole episodes: a real harness, the capture proxy, the oracle policy ----------------------------------

HARNESS = "claude-code"  # an npm harness: runs from the mounted harness cache in any image with node


def _require_harness() -> None:
    from openenv.harness.catalog import get_spec
    from openenv.harness.install import install_status

    status = install_status(get_spec(HARNESS))
    if not status.ready:
        pytest.skip(f"{HARNESS} {status.pinned} is not installed; run scripts/install_harnesses.sh {HARNESS}")


def test_an_oracle_episode_through_a_harness_pulls_the_image_and_scores_one(
    client: docker.DockerClient,
    registry_image: Callable[..., tuple[str, str]],
    tmp_path: Path,
    capture_server: object,
) -> None:
    from openenv.harness.environment import EpisodeSettings, HarnessEnvironment
    from openenv.harness.rollout import run_episode

    _require_harness()
    reference, nonce = registry_image()
    task = load_harbor_task(_task(tmp_path / "task", reference, nonce))
    env = HarnessEnvironment(HARNESS, server=capture_server, settings=EpisodeSettings(sandbox="docker"))
    try:
        obs, summary = run_episode(env, task, policy="oracle")
    finally:
        env.close()
    detail = f"{summary}\n--- harness output ---\n{obs.output_tail}"
    assert (summary.reward, summary.reward_status, summary.status) == (1.0, "scored", "exited"), detail
    assert any(note.startswith(f"image {reference} pulled (sha256:") for note in summary.notes), summary.notes


def test_an_unreachable_registry_is_an_error_outcome_with_no_reward(
    client: docker.DockerClient, tmp_path: Path, capture_server: object
) -> None:
    from openenv.core.net import free_port
    from openenv.harness.environment import EpisodeSettings, HarnessEnvironment
    from openenv.harness.rollout import run_episode

    _require_harness()
    reference = f"127.0.0.1:{free_port()}/tasks/gone:1"
    task = load_harbor_task(_task(tmp_path / "task", reference, "x"))
    env = HarnessEnvironment(HARNESS, server=capture_server, settings=EpisodeSettings(sandbox="docker"))
    try:
        _, summary = run_episode(env, task, policy="oracle")
    finally:
        env.close()
    assert (summary.status, summary.reward) == ("error", None)
    assert (
        f"pulling image {reference} failed" in (summary.error or "") and "connection refused" in summary.error
    )


def test_openenv_run_pull_never_refuses_with_the_image_named(
    client: docker.DockerClient, registry_image: Callable[..., tuple[str, str]], tmp_path: Path
) -> None:
    import os
    import subprocess
    import sys

    _require_harness()
    reference, nonce = registry_image()
    _task(tmp_path / "tasks" / "pulled-task", reference, nonce)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "openenv.cli.main",
            "run",
            "--harness",
            HARNESS,
            "--policy",
            "oracle",
            "--sandbox",
            "docker",
            "--tasks",
            str(tmp_path / "tasks"),
            "--task",
            "pulled-task",
            "--pull",
            "never",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    said = " ".join(done.stderr.split())
    assert reference in said and "pulling is off" in said, said
    with pytest.raises(docker.errors.ImageNotFound):
        client.images.get(reference)


def test_pull_always_asks_the_registry_once_per_process_and_a_digest_never_again(
    client: docker.DockerClient,
    registry_image: Callable[..., tuple[str, str]],
    loopback_registry: LoopbackRegistry,
) -> None:
    from openenv.harness.sandbox.pull import ensure_image

    reference, _ = registry_image()
    repository = reference.split("/", 1)[1].rsplit(":", 1)[0]

    def asked() -> int:  # a pull of a tag the engine holds may only HEAD the manifest
        path = f"/v2/{repository}/manifests/"
        return loopback_registry.requests("GET", path) + loopback_registry.requests("HEAD", path)

    client.images.pull(reference)  # present, as after an earlier run
    pinned = f"{split_reference(reference)[0]}@{loopback_registry.digest(reference.split('/', 1)[1])}"
    start = asked()
    assert ensure_image(client, reference, policy="missing", progress=lambda _: None) is None
    assert asked() == start
    assert ensure_image(client, reference, policy="always", progress=lambda _: None).startswith(
        f"image {reference}"
    )
    once_asked = asked()
    assert once_asked > start  # the registry was asked again
    assert ensure_image(client, reference, policy="always", progress=lambda _: None) is None
    assert asked() == once_asked  # but once per process
    assert (
        ensure_image(client, pinned, policy="always", progress=lambda _: None) is None
    )  # immutable, present
    assert asked() == once_asked
    assert pulled.entries() == []  # nothing new was brought in: not the run's to collect
