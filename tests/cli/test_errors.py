"""Each error a new user meets in the first hour: one clear line (two with its fix), no traceback, a
non-zero exit code, and nothing started or waited on first. Every test runs the real `openenv` command.

A wheel install without an extra is imitated by an import hook that makes the extra's packages
unimportable (`_without`), the way a venv that lacks them fails.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

# Runs the CLI's console-script entry point with some top-level packages unimportable.
WITHOUT = """
import importlib.abc, sys
blocked = set(sys.argv[1].split(","))
class Missing(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in blocked:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, Missing())
sys.argv = ["openenv", *sys.argv[2:]]
from openenv.cli.main import main
main()
"""


def _openenv(
    *args: str, without: tuple[str, ...] = (), env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    command = (
        [sys.executable, "-c", WITHOUT, ",".join(without)]
        if without
        else [sys.executable, "-m", "openenv.cli.main"]
    )
    return subprocess.run(
        [*command, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={**os.environ, **(env or {})},
    )


def _one_clear_error(proc: subprocess.CompletedProcess[str], *words: str) -> None:
    """At most three lines on stderr, starting `error:`, no traceback, non-zero exit, naming `words`."""
    lines = proc.stderr.strip().splitlines()
    detail = f"rc={proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    assert proc.returncode != 0, detail
    assert "Traceback" not in proc.stderr + proc.stdout, detail
    assert 1 <= len(lines) <= 3 and lines[0].startswith("error: "), detail
    assert all(word in proc.stderr for word in words), detail


def test_docker_sandbox_without_an_engine_says_to_start_docker() -> None:
    """Was a 141-line traceback ending in DockerException."""
    proc = _openenv(
        "run",
        "--harness",
        "pi",
        "--sandbox",
        "docker",
        env={"DOCKER_HOST": "unix:///nonexistent/docker.sock"},
    )
    _one_clear_error(proc, "needs a running Docker engine", "start Docker", "--sandbox local")


def test_docker_sandbox_without_the_docker_package_names_the_extra() -> None:
    proc = _openenv("run", "--harness", "pi", "--sandbox", "docker", without=("docker",))
    _one_clear_error(proc, "'docker'", "pip install", "[docker]")


def test_harness_list_without_the_capture_extra_names_it() -> None:
    """Was `No module named 'msgspec'` with a traceback, from a bare wheel install."""
    proc = _openenv("harness", "list", without=("msgspec",))
    _one_clear_error(proc, "'msgspec'", "[capture]")


def test_eval_refuses_an_unknown_harness_before_running_anything(tmp_path: Path) -> None:
    """Was: pi ran, then a 0% `codx` row in the table and the chart, exit 0."""
    proc = _openenv("eval", "--harness", "pi,codx", "--out", str(tmp_path / "eval"))
    _one_clear_error(proc, "unknown harness 'codx'")
    assert not (tmp_path / "eval").exists()


def test_an_unknown_task_set_is_a_local_error_at_once() -> None:
    """Was 25 s of retries against the Hub, then a `datasets` traceback."""
    start = time.monotonic()
    proc = _openenv("tasks", "nosuchset")
    _one_clear_error(proc, "'nosuchset'", "no task set by that name", "builtin")
    assert time.monotonic() - start < 20


def test_a_hub_dataset_is_not_fetched_while_offline() -> None:
    proc = _openenv("tasks", "someorg/some-tasks", env={"HF_HUB_OFFLINE": "1"})
    _one_clear_error(proc, "HF_HUB_OFFLINE")


def test_a_task_folder_that_does_not_exist_is_named() -> None:
    """Was a FileNotFoundError traceback."""
    proc = _openenv("run", "--harness", "pi", "--tasks", "/nonexistent", "--task", "x")
    _one_clear_error(proc, "'/nonexistent'", "no such file or folder")


def test_an_engine_that_does_not_answer_fails_fast_with_its_address() -> None:
    """Was ~45 s, exit 0, status failed and reward 0 `scored`; the cause only inside the trajectory."""
    from openenv.core.net import free_port

    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    start = time.monotonic()
    proc = _openenv("run", "--harness", "pi", "--backend", "vllm", "--vllm-url", url)
    _one_clear_error(proc, url, "unreachable", "nothing was run")
    assert time.monotonic() - start < 30


def test_the_missing_base_image_hint_says_where_the_script_is() -> None:
    """A wheel does not ship scripts/build_base_image.sh: the message says it comes with a source checkout,
    and names the way out that every install has."""
    from openenv.harness.sandbox.base_image import base_image_hint

    hint = base_image_hint()
    assert "source checkout" in hint and "a wheel does not ship" in hint and "--sandbox local" in hint


@pytest.mark.slow
def test_run_reports_an_episode_without_a_verdict_as_an_error(tmp_path: Path) -> None:
    """The policy plays (pi, oracle) but the task's tests crash before writing a reward: status `error`, no
    reward, the cause in the JSON and on stderr, exit code 1; the trajectory is still written."""
    from openenv.harness.catalog import get_spec
    from openenv.harness.install import install_status

    if not install_status(get_spec("pi")).ready:
        pytest.skip("pi is not installed; run scripts/install_harnesses.sh pi")
    task = tmp_path / "tasks" / "tests-crash"
    for folder in ("solution", "tests", "environment"):
        (task / folder).mkdir(parents=True)
    (task / "instruction.md").write_text("Create hello.txt containing hi.\n")
    (task / "task.toml").write_text('schema_version = "1.3"\n\n[verifier]\ntimeout_sec = 30.0\n')
    (task / "environment" / "Dockerfile").write_text("FROM python:3.11-slim\nWORKDIR /app\n")
    (task / "solution" / "solve.sh").write_text("#!/bin/bash\necho hi > hello.txt\n")
    (task / "tests" / "test.sh").write_text("#!/bin/bash\necho 'the tests crashed'\nexit 3\n")
    out = tmp_path / "episode.jsonl"
    proc = _openenv(
        "run",
        "--harness",
        "pi",
        "--policy",
        "oracle",
        "--tasks",
        str(task),
        "--task",
        "tests-crash",
        "--json",
        "--out",
        str(out),
        timeout=600,
    )
    summary = json.loads(proc.stdout)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert (
        summary["status"] == "error" and summary["reward"] is None and summary["harness_status"] == "exited"
    )
    assert "reward_missing" in summary["error"] and summary["turns"] >= 1, summary
    assert "error: the episode ended in status error" in proc.stderr and "Traceback" not in proc.stderr
    assert out.is_file()
