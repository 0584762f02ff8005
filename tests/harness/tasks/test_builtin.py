"""The built-in task set: every reference solution passes its hidden tests; the untouched repo fails."""

from __future__ import annotations

import pytest

from openenv.errors import NotFound
from openenv.harness.sandbox import LocalSandbox
from openenv.harness.tasks import builtin_task, builtin_task_ids
from openenv.harness.tasks.builtin import BUILTIN_DIR, RUNNER
from openenv.harness.verifier import verify


def test_there_are_at_least_twelve_builtin_tasks():
    assert len(builtin_task_ids()) >= 12


@pytest.mark.parametrize("task_id", builtin_task_ids())
def test_reference_solution_passes_and_untouched_workspace_fails(task_id):
    task = builtin_task(task_id)
    assert task.instruction and task.workspace and task.solution.startswith("#!/bin/sh")
    with LocalSandbox() as untouched:
        untouched.write_files(task.workspace)
        before = verify(untouched, task)
    with LocalSandbox() as solved:
        solved.write_files(task.workspace)
        applied = solved.run(["sh", "-c", task.solution])
        assert applied.exit_code == 0, applied.output
        after = verify(solved, task)
    assert not before.solved and before.reward == 0.0, before.output_tail
    assert after.solved and after.reward == 1.0, after.output_tail
    assert after.tests_passed == after.tests_total >= 2


def test_hidden_tests_are_not_in_the_workspace():
    for task_id in builtin_task_ids():
        task = builtin_task(task_id)
        hidden = {name for name in task.tests if name.startswith("test_") and name.endswith(".py")}
        assert hidden and not hidden & set(task.workspace), task_id


def test_unknown_task_id_names_the_known_ones():
    with pytest.raises(NotFound, match="fix-binary-search"):
        builtin_task("no-such-task")


def test_every_builtin_gets_the_one_runner_staged_with_its_hidden_tests():
    """Harbor refuses links leaving a task folder; the runner lives once and is staged at load, not copied."""
    canonical = RUNNER.read_text()
    assert "reward.json" in canonical
    for task_id in builtin_task_ids():
        assert not (BUILTIN_DIR / task_id / "tests" / "run_tests.py").exists(), (
            f"{task_id}: a copy crept back"
        )
        assert "run_tests.py" in (BUILTIN_DIR / task_id / "tests" / "test.sh").read_text(), task_id
        assert builtin_task(task_id).tests["run_tests.py"] == canonical, task_id


def test_finding_a_builtin_task_by_id_reads_its_folder_alone(monkeypatch) -> None:
    """Every episode looks its task up by id; loading the whole set for it cost 23 ms of CPU, ~4% of a
    sub-second episode. An unknown id still gets the set's ids in its message."""
    from openenv.harness.tasks import builtin, sets

    loaded: list[str] = []
    real = builtin.load_harbor_task
    monkeypatch.setattr(builtin, "load_harbor_task", lambda d, **kw: loaded.append(d.name) or real(d, **kw))
    task = sets.find_task("fix-temperature-conversion")
    assert task.id == "fix-temperature-conversion" and "run_tests.py" in task.tests
    assert loaded == ["fix-temperature-conversion"]
    with pytest.raises(NotFound, match="has no task 'nope'.*fix-temperature-conversion"):
        sets.find_task("nope")
