"""Task images without a Docker daemon: a Harbor task naming an image on a registry (a real one, on
loopback) runs in the local sandbox in that image's root filesystem, fetched with skopeo and unpacked
with umoci once per digest, with the Docker daemon hidden the whole time.

The image is built and pushed with the engine (as its publisher would), then removed from the engine,
so only the registry has it.
"""

from __future__ import annotations

import os
import socket
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest

from openenv.errors import BadRequest, EnvError
from openenv.harness.environment import HarnessEnvironment
from openenv.harness.sandbox.docker import engine_available
from openenv.harness.sandbox.images import OFFLINE_BASE
from openenv.harness.sandbox.isolation import SANDBOX_UID
from openenv.harness.sandbox.rootfs import RootfsCache, fetch_tools_missing, resolve_in_root
from openenv.harness.solution import apply_solution
from openenv.harness.tasks import load_harbor_task

REPO = Path(__file__).resolve().parents[3]
DEAD_DOCKER = "unix:///nonexistent/openenv-no-daemon.sock"
MARKER = "only-in-the-held-image"


@pytest.fixture(scope="module")
def held_image(loopback_registry: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """(`127.0.0.1:PORT/tasks/held:1`, its `@sha256:` pinned form): built FROM the offline base with a
    marker file and a workdir, pushed to the loopback registry, and removed from the engine."""
    for reason in (engine_available(), fetch_tools_missing()):
        if reason is not None:
            pytest.skip(reason)
    if subprocess.run(["docker", "image", "inspect", OFFLINE_BASE], capture_output=True).returncode != 0:
        subprocess.run(["bash", str(REPO / "scripts" / "build_base_image.sh")], check=True)
    context = tmp_path_factory.mktemp("held-image")
    (context / "main.py").write_text("def answer():\n    return 41\n")
    (context / "Dockerfile").write_text(
        f"FROM {OFFLINE_BASE}\nUSER root\nRUN echo {MARKER} > /etc/held-marker && mkdir -p /srv/app\n"
        "COPY main.py /srv/app/main.py\nWORKDIR /srv/app\n"
    )
    tag = "openenv-test/held:1"
    subprocess.run(
        ["docker", "build", "-q", "--network", "none", "-t", tag, str(context)],
        check=True,
        capture_output=True,
    )
    ref = loopback_registry.push(tag, "tasks/held:1")
    subprocess.run(["docker", "rmi", ref, tag], check=True, capture_output=True)
    digest = subprocess.run(
        ["skopeo", "inspect", "--tls-verify=false", "--format", "{{.Digest}}", f"docker://{ref}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    return ref, f"{ref.rpartition(':')[0]}@{digest}"


@pytest.fixture(scope="module")
def shared_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One rootfs cache for the module (each fetch of the base image costs seconds); tests that need an
    empty one make their own."""
    return tmp_path_factory.mktemp("rootfs")


@pytest.fixture
def no_daemon(monkeypatch: pytest.MonkeyPatch, shared_cache: Path) -> Path:
    """The Docker daemon hidden (DOCKER_HOST names a socket that does not exist); the module's cache."""
    monkeypatch.setenv("DOCKER_HOST", DEAD_DOCKER)
    assert engine_available() is not None, "the daemon must be unreachable for these tests to mean anything"
    monkeypatch.setenv("OPENENV_ROOTFS_CACHE", str(shared_cache))
    monkeypatch.delenv("OPENENV_PULL", raising=False)
    return shared_cache


def _task(folder: Path, image: str) -> Path:
    """A Harbor task whose environment is only `docker_image`: the oracle fixes main.py; the tests pass
    only in the image (its marker file) with the fix."""
    (folder / "tests").mkdir(parents=True)
    (folder / "solution").mkdir()
    (folder / "instruction.md").write_text("Make answer() in main.py return 42.\n")
    (folder / "task.toml").write_text(
        f'schema_version = "1.4"\n[environment]\ndocker_image = "{image}"\n'
        'workdir = "/srv/app"\n[verifier]\ntimeout_sec = 60\n'
    )
    (folder / "tests" / "test.sh").write_text(
        "#!/bin/bash\n"
        f'if grep -q {MARKER} /etc/held-marker && python3 -c "import main; assert main.answer() == 42"; then\n'
        "  echo 1 > /logs/verifier/reward.txt\nelse\n  echo 0 > /logs/verifier/reward.txt\nfi\n"
    )
    (folder / "solution" / "solve.sh").write_text("#!/bin/bash\nsed -i 's/41/42/' main.py\n")
    return folder


def test_a_held_task_naming_a_registry_image_is_solved_by_the_oracle_with_no_daemon(
    held_image: tuple[str, str], no_daemon: Path, tmp_path: Path
) -> None:
    task = load_harbor_task(_task(tmp_path / "held", held_image[0]))
    notes: list[str] = []
    make, grader = HarnessEnvironment("pi")._sandbox_parts("local", task, notes)
    with make(()) as untouched:
        assert untouched.read_file("main.py") == "def answer():\n    return 41\n", (
            "the image's workdir is the workspace"
        )
        before = grader(untouched, task)
    assert (before.status, before.reward) == ("scored", 0.0), before
    with make(()) as solved:
        applied = apply_solution(solved, task)
        assert applied.exit_code == 0, applied.output
        inside = solved.run(
            [
                "sh",
                "-c",
                "cat /etc/held-marker; id -u; touch /etc/x 2>&1; ls /var/run/docker.sock 2>&1; "
                "grep ' /usr ' /proc/self/mountinfo",
            ]
        )
        after = grader(solved, task)
    assert (after.status, after.reward) == ("scored", 1.0), after
    assert MARKER in inside.output, "the sandbox's / is the image's root filesystem"
    assert "Read-only file system" in inside.output, "the image root is read-only"
    assert "No such file" in inside.output, "no Docker socket inside"
    assert " /usr ro,nosuid,nodev" in inside.output, (
        "a setuid binary or device node of the image does nothing"
    )
    agent_uid = SANDBOX_UID if os.geteuid() == 0 else os.getuid()
    assert f"\n{agent_uid}\n" in inside.output, "the agent's uid, not the image's root"
    assert len(list((no_daemon / "roots").iterdir())) == 1, "one unpack for both episodes"
    assert not list((no_daemon / "roots").glob("*/leases/*")), "each episode released its lease"


@pytest.mark.slow
def test_openenv_run_solves_the_held_task_through_pi_in_the_image_with_no_daemon(
    held_image: tuple[str, str], no_daemon: Path, tmp_path: Path
) -> None:
    """The acceptance run as a user types it: `openenv run --sandbox local --policy oracle` on a Harbor
    folder whose task names the registry image; pi itself runs inside the image's root filesystem."""
    import json
    import sys

    from openenv.harness.catalog import get_spec
    from openenv.harness.install import install_status

    if not install_status(get_spec("pi")).ready:
        pytest.skip("pi is not installed; run scripts/install_harnesses.sh pi")
    folder = _task(tmp_path / "tasks" / "held", held_image[0]).parent
    ran = subprocess.run(
        [
            sys.executable,
            "-m",
            "openenv.cli.main",
            "run",
            "--harness",
            "pi",
            "--tasks",
            str(folder),
            "--task",
            "held",
            "--policy",
            "oracle",
            "--sandbox",
            "local",
            "--json",
            "--out",
            str(tmp_path / "t.jsonl"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={**os.environ, "DOCKER_HOST": DEAD_DOCKER},
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    summary = json.loads(ran.stdout)
    assert (summary["reward"], summary["reward_status"]) == (1.0, "scored"), summary


def test_the_pull_policy_never_refuses_an_image_not_unpacked_and_a_pinned_digest_needs_no_registry(
    held_image: tuple[str, str], no_daemon: Path, tmp_path: Path
) -> None:
    ref, pinned = held_image
    with pytest.raises(EnvError, match="pull policy is never"):
        RootfsCache(tmp_path / "empty", policy="never").get(ref)
    fetched = RootfsCache().get(pinned)
    assert fetched.digest == pinned.partition("@")[2] and fetched.workdir == "/srv/app"
    again = RootfsCache(policy="never").get(pinned)  # no network: the digest names the root
    assert again.path == fetched.path
    assert resolve_in_root(again.rootfs, "/etc/held-marker").read_text().strip() == MARKER


def test_concurrent_first_episodes_of_one_image_share_one_fetch_and_unpack(
    held_image: tuple[str, str], no_daemon: Path, tmp_path: Path
) -> None:
    caches = [
        RootfsCache(tmp_path / "fresh") for _ in range(4)
    ]  # as four processes would: one cache folder, separate objects
    roots: list[Path] = []
    errors: list[BaseException] = []

    def first(cache: RootfsCache) -> None:
        try:
            roots.append(cache.get(held_image[0]).path)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=first, args=(c,)) for c in caches]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    assert not errors, errors
    assert len(set(roots)) == 1 and sum(c.fetches for c in caches) == 1


def test_an_unreachable_registry_is_an_error_naming_the_image(no_daemon: Path) -> None:
    with pytest.raises(EnvError, match=r"127\.0\.0\.1:9/nothing/here:1"):
        RootfsCache().get("127.0.0.1:9/nothing/here:1")


def test_a_dockerfile_task_that_needs_a_build_is_refused_without_a_daemon_with_the_reason(
    no_daemon: Path,
) -> None:
    task = load_harbor_task(REPO / "tests" / "fixtures" / "harbor" / "run-pip-install")
    with pytest.raises(BadRequest, match="needs an image build.*no Docker engine answers"):
        HarnessEnvironment("pi")._sandbox_parts("local", task, [])


def test_openenv_sandbox_sweep_collects_unpacks_left_by_dead_processes_without_a_daemon(
    no_daemon: Path,
) -> None:
    from typer.testing import CliRunner

    from openenv.cli.main import app

    RootfsCache()  # the cache folders
    left = no_daemon / "tmp" / f"{socket.gethostname()}-999999999-1.00.xyz"  # a crashed unpack
    (left / "rootfs" / "usr").mkdir(parents=True)
    (left / "rootfs" / "usr" / "locked").mkdir(mode=0o555)  # an image's read-only folder does not stop it
    result = CliRunner().invoke(app, ["sandbox", "sweep"])
    assert result.exit_code == 0, result.output
    assert "removed 1 unpacked image roots" in result.output and not left.exists()


def test_unheld_roots_are_collected_and_held_ones_kept(held_image: tuple[str, str], no_daemon: Path) -> None:
    """Last in the module: it empties the shared cache."""
    cache = RootfsCache()
    root = cache.get(held_image[0])
    stale = (
        no_daemon / "tmp" / f"{socket.gethostname()}-999999999-1.00.abc"
    )  # an unpack whose process is gone
    stale.mkdir()
    with cache.lease(root):
        removed = cache.gc(everything=True)
        assert root.path.is_dir() and str(root.path) not in removed
    assert str(stale) in removed or not stale.exists()
    dead = (
        root.path / "leases" / f"{socket.gethostname()}-999999999-1.00.dead"
    )  # a lease of a process long gone
    dead.write_text("{}")
    assert cache.gc(everything=True) == [str(root.path)] and not root.path.exists()
