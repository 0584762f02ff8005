"""LocalSandbox shows a Harbor task's folders at their absolute paths, never on the host's `/`, and
splits the agent from the grader: `end_agent()`, `stage()` and `fresh_dir()`."""

from __future__ import annotations

import os
import time

import pytest

from openenv.errors import BadRequest
from openenv.harness.sandbox import LocalSandbox


def test_task_scripts_see_harbor_paths_and_the_host_sees_none_of_them():
    before = {p: os.path.exists(p) for p in ("/app", "/tests", "/logs", "/solution")}
    with LocalSandbox() as box:
        box.write_files({"main.py": "print(1)\n"})
        box.stage(
            "/tests",
            {
                "test.sh": 'VERIFIER_DIR="${VERIFIER_DIR:-/logs/verifier}"\n'
                'ls /app > "$VERIFIER_DIR/seen.txt"; echo 1 > "$VERIFIER_DIR/reward.txt"\n'
            },
        )
        result = box.run(["sh", "/tests/test.sh"], timeout_s=30)
        assert result.exit_code == 0, result.output
        assert box.host_path("/logs/verifier/reward.txt").read_text() == "1\n"
        assert box.host_path("/logs/verifier/seen.txt").read_text() == "main.py\n"
        assert box.run(["pwd"]).output.strip() == "/app"
    assert {p: os.path.exists(p) for p in before} == before


def test_staged_tests_are_read_only_and_the_reward_folder_starts_fresh():
    with LocalSandbox() as box:
        box.stage("/tests", {"test.sh": "exit 0\n"})
        tamper = box.run(["sh", "-c", "echo hacked > /tests/test.sh; echo 1 > /logs/verifier/reward.txt"])
        assert "Read-only" in tamper.output
        assert box.host_path("/tests/test.sh").read_text() == "exit 0\n"
        box.end_agent()
        assert list(box.fresh_dir("/logs/verifier").iterdir()) == []


def test_a_custom_workdir_is_where_processes_start():
    with LocalSandbox(workdir="/workspace") as box:
        box.stage("/workspace", {"a.txt": "x"}, readonly=False)
        assert box.run(["sh", "-c", "pwd; cat a.txt"]).output.split() == ["/workspace", "x"]
        assert box.host_path("/workspace/a.txt") == box.workspace / "a.txt"


def test_end_agent_kills_everything_started_and_leaves_the_sandbox_usable():
    with LocalSandbox() as box:
        box.start(["sh", "-c", "setsid sleep 120 & sleep 120"], env={}, timeout_s=60)
        deadline = time.monotonic() + 10
        while len(box.leftover_pids()) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert box.leftover_pids()
        box.end_agent()
        assert box.leftover_pids() == []
        box.end_agent()  # idempotent
        assert box.run(["echo", "grading"]).output.strip() == "grading"


@pytest.mark.parametrize("path", ["/etc/passwd", "relative", "/tests/../etc", "/"])
def test_host_path_refuses_paths_outside_the_sandbox_folders(path):
    with LocalSandbox() as box, pytest.raises(BadRequest):
        box.host_path(path)


def test_stage_refuses_escaping_keys():
    with LocalSandbox() as box, pytest.raises(BadRequest):
        box.stage("/tests", {"../../escape": "x"})


def test_the_default_harness_cache_is_shown_when_no_variable_names_it(monkeypatch) -> None:
    """The README's main job runs without OPENENV_HARNESS_CACHE: the sandbox must show the folder the
    installer used by default, or the harness CLI is 'not found' inside and the episode fails at once."""
    from openenv.harness.install import cache_root
    from openenv.harness.sandbox.local import LocalSandbox

    monkeypatch.delenv("OPENENV_HARNESS_CACHE", raising=False)
    root = cache_root()
    if not root.is_dir():
        pytest.skip(f"no harness is installed in {root}; run scripts/install_harnesses.sh pi")
    with LocalSandbox(network="host") as box:
        result = box.run(["ls", str(root)], timeout_s=30)
    assert result.exit_code == 0, result.output
    assert sorted(result.output.split()) == sorted(p.name for p in root.iterdir())
