"""Ten independent Harbor tasks (tests/fixtures/harbor/, written in the variants real datasets use) run
unchanged in both sandboxes: the untouched workspace scores 0, Harbor's oracle (solution/ at /solution,
solve.sh from the workdir with [solution].env) scores 1, and nothing lands outside the sandbox.

Docker runs each task's own image: copy-only Dockerfiles run as their FROM image, the others are
built from environment/; the public FROM images are substituted by `openenv/python:3.11` (the offline
base plus pip), exactly as a user would with `--image-substitute`.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from openenv.capture.canonical import SamplingParams
from openenv.capture.engine import EngineSpec
from openenv.errors import BadRequest, EnvError
from openenv.harness.environment import EpisodeSettings, HarnessEnvironment, stage_workspace
from openenv.harness.sandbox import LocalSandbox
from openenv.harness.sandbox.docker import DockerSandbox
from openenv.harness.sandbox.docker_episode import sandbox_factory, verify_isolated
from openenv.harness.sandbox.images import PYTHON_IMAGE, build_python_image
from openenv.harness.sandbox.local_image import local_image_factory
from openenv.harness.solution import apply_solution
from openenv.harness.tasks import Task, load_harbor_task, load_task_set
from openenv.harness.verifier import Verdict, verify

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "harbor"
FIXTURE_IDS = sorted(p.name for p in FIXTURES.iterdir() if (p / "task.toml").is_file())
HARBOR_PATHS = ("/app", "/tests", "/logs", "/solution", "/workspace")
RANDOM_MODEL_FIXTURES = ("always-exit-zero", "verifier-dir-default", "legacy-version-hello")
_ROOTS: list[Path] = []  # every sandbox folder this module made: all gone at the end


def _digest(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            digest.update(path.relative_to(folder).as_posix().encode() + path.read_bytes())
    return digest.hexdigest()


@pytest.fixture(scope="module")
def python_image(client: docker.DockerClient) -> str:
    return build_python_image(client, progress=lambda line: None)


@pytest.fixture(scope="module")
def substitutes(python_image: str) -> dict[str, str]:
    return {"python:3.11-slim": python_image, "ubuntu:24.04": python_image}


@pytest.fixture(scope="module", autouse=True)
def nothing_outside_the_sandboxes() -> Iterator[None]:
    """Every episode of this module leaves the host as it found it: no Harbor path appears on the host's
    `/`, the task folders are byte-for-byte unchanged, and no sandbox folder is left in the temp dir."""
    before_paths = {p: os.path.exists(p) for p in HARBOR_PATHS}
    before_tasks = _digest(FIXTURES)
    yield
    assert {p: os.path.exists(p) for p in HARBOR_PATHS} == before_paths
    assert _digest(FIXTURES) == before_tasks
    assert [root for root in _ROOTS if root.exists()] == []


def test_there_are_at_least_eight_independent_fixtures_and_all_load():
    tasks = load_task_set(str(FIXTURES))
    assert len(tasks) == len(FIXTURE_IDS) >= 8
    assert {t.schema_version for t in tasks} >= {"1.0", "1.3", "1.4"}
    assert any(t.workdir == "/workspace" for t in tasks)
    assert any(t.solution is None for t in tasks) and any(t.build_steps for t in tasks)


def _sandbox(
    kind: str, task: Task, client: docker.DockerClient, substitutes: dict[str, str]
) -> LocalSandbox | DockerSandbox:
    if kind == "local" and task.needs_build():
        box: LocalSandbox | DockerSandbox = local_image_factory(task, substitutes=substitutes)(())
    elif kind == "local":
        box = LocalSandbox(workdir=task.workdir)
    else:
        box = sandbox_factory(task, substitutes=substitutes, client=client)(())
    _ROOTS.append(box.root)
    if not getattr(box, "workspace_ready", False):
        stage_workspace(box, task)
    return box


def _grade(kind: str, box: LocalSandbox | DockerSandbox, task: Task) -> Verdict:
    if isinstance(box, DockerSandbox) and task.verifier_mode == "separate":
        return verify_isolated(box, task)
    return verify(box, task)


@pytest.mark.parametrize("kind", ["local", "docker"])
@pytest.mark.parametrize("fixture", FIXTURE_IDS)
def test_untouched_scores_zero_and_the_oracle_scores_one(
    fixture: str, kind: str, request: pytest.FixtureRequest
) -> None:
    task = load_harbor_task(FIXTURES / fixture)
    client = request.getfixturevalue("client") if kind == "docker" else None
    subs = request.getfixturevalue("substitutes") if kind == "docker" else {}
    if (
        kind == "local" and task.needs_build()
    ):  # built by the daemon, run from its unpacked root (test_local_image)
        client = request.getfixturevalue("client")
        subs = request.getfixturevalue("substitutes")
    with _sandbox(kind, task, client, subs) as untouched:
        before = _grade(kind, untouched, task)
    assert (before.status, before.reward) == ("scored", 0.0), before
    with _sandbox(kind, task, client, subs) as solved:
        if task.solution is None:
            with pytest.raises(BadRequest, match="no solution"):
                apply_solution(solved, task)
            return
        applied = apply_solution(solved, task)
        assert applied.exit_code == 0, applied.output
        after = _grade(kind, solved, task)
    assert (after.status, after.reward) == ("scored", 1.0), after


def test_a_missing_from_image_is_named_with_the_way_out(client: docker.DockerClient) -> None:
    task = load_harbor_task(FIXTURES / "schema13-fix-median")
    absent = "example.invalid/absent:1"
    # pull="never": a pull of a name that is not on loopback would leave this machine (tests of pulling
    # use a registry on 127.0.0.1: test_pull.py)
    with pytest.raises(
        EnvError,
        match=f"image {absent} is not in the Docker engine.*--image-substitute {absent}=openenv/base",
    ):
        sandbox_factory(task.model_copy(update={"base_image": absent}), client=client, pull="never")
    notes: list[str] = []
    sandbox_factory(task, substitutes={"python:3.11-slim": PYTHON_IMAGE}, client=client, notes=notes)
    assert notes == [f"image python:3.11-slim substituted by {PYTHON_IMAGE}"]
    notes.clear()  # `*=IMAGE` stands in for any missing image, and is reported the same way
    sandbox_factory(
        task.model_copy(update={"base_image": absent}),
        substitutes={"*": PYTHON_IMAGE},
        client=client,
        notes=notes,
    )
    assert notes == [f"image {absent} substituted by {PYTHON_IMAGE}"]


def _require_pi() -> None:
    from openenv.harness.catalog import get_spec
    from openenv.harness.install import install_status

    if not install_status(get_spec("pi")).ready:
        pytest.skip("pi is not installed; run scripts/install_harnesses.sh pi")


@pytest.mark.slow
@pytest.mark.vllm
@pytest.mark.parametrize("kind", ["local", "docker"])
def test_the_random_tiny_model_never_scores_one(
    kind: str, vllm_url: str, request: pytest.FixtureRequest
) -> None:
    """pi sampling from the random tiny model: 0 or no reward, never 1 (this scored 1.0 on every Harbor
    task before issue 16: empty workspace, host paths, exit code as the verdict). By default on the
    three fixtures shaped like that bug (test.sh exits 0, VERIFIER_DIR default, nothing copied in);
    OPENENV_HARBOR_SWEEP=all runs every fixture (about 12 s an episode on 2 busy cores)."""
    from openenv.harness.rollout import run_episode

    _require_pi()
    subs = request.getfixturevalue("substitutes") if kind == "docker" else {}
    # Short replies keep 19 episodes cheap; random tokens are as random at 48 as at 256.
    env = HarnessEnvironment(
        "pi",
        engine=EngineSpec.of("vllm", vllm_url=vllm_url),
        settings=EpisodeSettings(
            sandbox=kind, image_substitutes=subs, sampling=SamplingParams(max_tokens=48, temperature=1.0)
        ),
    )
    results = {}
    try:
        for fixture in (
            FIXTURE_IDS if os.environ.get("OPENENV_HARBOR_SWEEP") == "all" else RANDOM_MODEL_FIXTURES
        ):
            task = load_harbor_task(FIXTURES / fixture)
            if kind == "local" and task.needs_build():
                continue  # refused by the local sandbox (test_untouched_scores_zero_and_the_oracle_scores_one)
            _, summary = run_episode(env, task, policy="sample", timeout_s=120)
            results[fixture] = (summary.reward, summary.reward_status, summary.turns)
    finally:
        env.close()
    print(f"random tiny model, {kind}: {results}")
    assert len(results) >= len(RANDOM_MODEL_FIXTURES)
    assert all(reward is None or reward <= 0.0 for reward, _, _ in results.values()), results


@pytest.mark.slow
def test_openenv_run_on_a_harbor_folder_in_docker_prints_the_substitution(
    python_image: str, tmp_path: Path
) -> None:
    """The README's promise, as a user types it: without a substitute, a clear error naming the image;
    with one, the oracle scores 1 and the summary says what was substituted."""
    _require_pi()
    base = [
        sys.executable,
        "-m",
        "openenv.cli.main",
        "run",
        "--harness",
        "pi",
        "--tasks",
        str(FIXTURES),
        "--task",
        "legacy-version-hello",
        "--policy",
        "oracle",
        "--sandbox",
        "docker",
        "--json",
        "--out",
        str(tmp_path / "t.jsonl"),
    ]
    env = {k: v for k, v in os.environ.items() if k != "OPENENV_IMAGE_SUBSTITUTES"}
    # --pull never: a pull of ubuntu:24.04 would leave this machine; offline, the refusal names the ways out
    refused = subprocess.run(
        [*base, "--pull", "never"], capture_output=True, text=True, timeout=300, check=False, env=env
    )
    assert refused.returncode == 1
    said = " ".join(refused.stderr.split())  # rich wraps long lines
    assert (
        "image ubuntu:24.04 is not in the Docker engine" in said
        and "--image-substitute ubuntu:24.04=openenv/base:latest" in said
    )
    ran = subprocess.run(
        [*base, "--image-substitute", f"ubuntu:24.04={python_image}"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env=env,
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    summary = json.loads(ran.stdout)
    assert summary["reward"] == 1.0 and summary["reward_status"] == "scored"
    assert summary["notes"] == [f"image ubuntu:24.04 substituted by {python_image}"]


def test_harbor_root_opt_in_lets_a_task_write_outside_the_workdir(
    client: docker.DockerClient, python_image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A solution that writes /etc (fine under Harbor, which runs as root) fails on our read-only default
    and passes with OPENENV_DOCKER_HARBOR_ROOT=1, which the notes report."""
    task = load_harbor_task(FIXTURES / "legacy-version-hello").model_copy(
        update={
            "solution": "echo configured > /etc/openenv-fixture.conf",
            "solution_files": {},
            "tests": {
                "test.sh": "grep -qx configured /etc/openenv-fixture.conf && echo 1 > /logs/verifier/reward.txt "
                "|| echo 0 > /logs/verifier/reward.txt\n"
            },
        }
    )
    subs = {"ubuntu:24.04": python_image}
    rewards = {}
    for flag in ("0", "1"):
        monkeypatch.setenv("OPENENV_DOCKER_HARBOR_ROOT", flag)
        notes: list[str] = []
        with sandbox_factory(task, substitutes=subs, client=client, notes=notes)(()) as box:
            _ROOTS.append(box.root)
            apply_solution(box, task)
            rewards[flag] = (verify(box, task).reward, any("as root" in n for n in notes))
    assert rewards == {"0": (0.0, False), "1": (1.0, True)}
