"""Harbor task directories load into Tasks whose container paths work in a local sandbox."""

from __future__ import annotations

from pathlib import Path

import pytest

from openenv.errors import BadRequest
from openenv.harness.sandbox import LocalSandbox
from openenv.harness.tasks import load_harbor_task, localize_paths
from openenv.harness.verifier import verify


def make_harbor_task(root: Path) -> Path:
    """A Harbor-format task as Harbor writes them: absolute /tests, /app, /logs/verifier paths."""
    task = root / "hello-file"
    (task / "tests").mkdir(parents=True)
    (task / "solution").mkdir()
    (task / "workspace").mkdir()
    (task / "instruction.md").write_text("Create hello.txt containing the word hello.\n")
    (task / "task.toml").write_text(
        'version = "1.0"\n[metadata]\ndifficulty = "easy"\n[agent]\ntimeout_sec = 60.0\n'
        "[verifier]\ntimeout_sec = 30.0\n"
    )
    (task / "workspace" / "README.md").write_text("empty project\n")
    (task / "tests" / "test.sh").write_text(
        "#!/bin/bash\ncd /app\n"
        'if grep -qx hello hello.txt 2>/dev/null; then echo 1 > /logs/verifier/reward.txt;'
        " else echo 0 > /logs/verifier/reward.txt; fi\n"
    )
    (task / "solution" / "solve.sh").write_text("#!/bin/bash\ncd /app && echo hello > hello.txt\n")
    return task


def test_container_paths_become_sandbox_variables():
    script = "cat /tests/x.py > /logs/verifier/reward.txt && cd /app; ls /application /tests"
    assert localize_paths(script) == (
        "cat $TESTS_DIR/x.py > $REWARD_DIR/reward.txt && cd $WORKSPACE; ls /application $TESTS_DIR"
    )


def test_harbor_task_loads_and_verifies(tmp_path):
    task = load_harbor_task(make_harbor_task(tmp_path))
    assert task.id == "hello-file" and task.source == "harbor"
    assert task.timeout_s == 60 and task.verifier_timeout_s == 30
    assert task.metadata == {"difficulty": "easy"}
    with LocalSandbox() as box:
        box.write_files(task.workspace)
        assert not verify(box, task).solved
        box.run(["bash", "-c", task.solution], env={"WORKSPACE": str(box.workspace)})
        verdict = verify(box, task)
    assert verdict.solved and verdict.reward == 1.0 and verdict.reported == {"reward": 1.0}


def test_missing_file_is_named(tmp_path):
    task_dir = make_harbor_task(tmp_path)
    (task_dir / "solution" / "solve.sh").unlink()
    with pytest.raises(BadRequest, match="solution/solve.sh is missing"):
        load_harbor_task(task_dir)
