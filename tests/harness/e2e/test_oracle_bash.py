"""The oracle as Harbor's: through real harnesses, in both sandboxes, on Harbor tasks whose solve.sh needs
bash (tests/fixtures/harbor/bash-*: `set -euo pipefail`, arrays, `[[ ]]`, here-documents, mapfile,
a final `exit 0`).

Sending the script's text made harnesses that run their shell tool with /bin/sh (codex, gemini-cli,
grok-cli, ...) fail at `set -o pipefail`, qwen-code's parser refuse it and openhands' persistent shell end
at its `exit`; the oracle now sends one line, `bash /solution/solve.sh`, run in the workdir. The sample covers
each wire format and each install kind: npm (claude-code: Anthropic; codex: Responses; gemini-cli: Gemini,
Node 22), pip on the system's Python (mini-swe-agent: OpenAI Chat) and pip on a copied Python 3.12 with
its own tmux (terminus-2: commands in the reply text). The whole grid is `bench/oracle_sweep.py`.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from openenv.harness.catalog import get_spec
from openenv.harness.environment import EpisodeSettings, HarnessEnvironment
from openenv.harness.install import docker_blocker
from openenv.harness.rollout import run_episode
from openenv.harness.sandbox import LocalSandbox
from openenv.harness.tasks import Task, load_harbor_task
from tests.harness.e2e.conftest import require_installed

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[3]
FIXTURES = sorted(
    p for p in (REPO / "tests" / "fixtures" / "harbor").glob("bash-*") if (p / "task.toml").is_file()
)
SAMPLE = ["claude-code", "codex", "gemini-cli", "mini-swe-agent", "terminus-2"]


def _task(i: int) -> Task:
    return load_harbor_task(FIXTURES[i % len(FIXTURES)])


@pytest.fixture(scope="module")
def substitutes() -> Iterator[dict[str, str]]:
    """The Harbor fixtures' public FROM image, substituted by the offline python image (as a user would
    with --image-substitute); skipped with the reason when no Docker engine answers."""
    from openenv.harness.sandbox.docker import engine_available

    reason = engine_available()
    if reason is not None:
        pytest.skip(reason)
    import docker

    from openenv.harness.sandbox.images import build_python_image

    subprocess.run(["bash", str(REPO / "scripts" / "build_base_image.sh")], check=True)
    client = docker.from_env()
    image = build_python_image(client, progress=lambda line: None)
    yield {"python:3.11-slim": image}
    client.close()


def test_there_are_bash_fixtures_and_their_scripts_fail_under_sh():
    """The fixtures really need bash: /bin/sh stops on them (the failure the oracle used to hit)."""
    assert len(FIXTURES) >= 2
    for path in FIXTURES:
        task = load_harbor_task(path)
        assert task.solution is not None and task.solution.startswith("#!/bin/bash")
        with LocalSandbox(workdir=task.workdir) as box:
            box.stage(box.workdir, dict(task.workspace), readonly=False)
            box.stage("/solution", {"solve.sh": task.solution}, readonly=True)
            under_sh = box.run(["sh", "/solution/solve.sh"], env=task.solution_env, cwd=box.workdir)
            under_bash = box.run(["bash", "/solution/solve.sh"], env=task.solution_env, cwd=box.workdir)
        assert under_sh.exit_code != 0 and "pipefail" in under_sh.output, under_sh.output
        assert under_bash.exit_code == 0, under_bash.output


@pytest.mark.parametrize("kind", ["local", "docker"])
@pytest.mark.parametrize("name", SAMPLE)
def test_the_oracle_runs_solve_sh_with_bash_through_the_harness(
    name, kind, capture_server, no_leftover_processes, request
):
    require_installed(name)
    subs: dict[str, str] = {}
    if kind == "docker":
        subs = request.getfixturevalue("substitutes")
        assert docker_blocker(get_spec(name)) is None, docker_blocker(get_spec(name))
    # Each harness gets the other fixture in the other sandbox: both fixtures, both sandboxes, half the runs.
    task = _task(SAMPLE.index(name) + (kind == "docker"))
    env = HarnessEnvironment(
        name, server=capture_server, settings=EpisodeSettings(sandbox=kind, image_substitutes=subs)
    )
    try:
        obs, summary = run_episode(env, task, policy="oracle")
    finally:
        env.close()
    detail = f"{summary}\n--- harness output ---\n{obs.output_tail}"
    assert (summary.reward, summary.reward_status) == (1.0, "scored"), detail
    assert summary.status == "exited", detail


def test_the_solution_is_staged_for_the_oracle_only(capture_server, no_leftover_processes):
    """A policy being trained never sees /solution: without `stage_solution` it is empty at the first
    model request; the oracle's episode has solve.sh there, read-only."""
    require_installed("pi")
    task = _task(0)
    env = HarnessEnvironment("pi", server=capture_server)
    try:
        env.reset(task=task)
        assert env._episode is not None
        hidden = env._episode.sandbox.host_path("/solution")
        assert not hidden.exists() or list(hidden.iterdir()) == []
        env.reset(task=task, stage_solution=True)
        staged = env._episode.sandbox.host_path("/solution") / "solve.sh"
        assert staged.read_text() == task.solution
    finally:
        env.close()
