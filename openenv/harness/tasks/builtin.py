"""The built-in task set: small, realistic Python repos (fix a bug, implement a function, make tests
pass), stored as Harbor task folders under `builtin/<id>/` (environment/Dockerfile copying `app/` to
`/app`, tests/test.sh writing /logs/verifier/reward.json) and loaded by the one Harbor loader.

Every task's `tests/test.sh` runs the same stdlib runner, `/tests/run_tests.py`. Harbor refuses links
that leave a task folder, so rather than a copy in each folder, the one source (`tasks/run_tests.py`) is
staged into each task's hidden tests when the task is loaded here."""

from __future__ import annotations

from pathlib import Path

from openenv.errors import NotFound
from openenv.harness.tasks.harbor import load_harbor_task
from openenv.harness.tasks.model import Task

__all__ = ["BUILTIN_DIR", "RUNNER", "builtin_task", "builtin_task_ids", "builtin_tasks"]

BUILTIN_DIR = Path(__file__).parent / "builtin"
RUNNER = Path(__file__).parent / "run_tests.py"


def builtin_task_ids() -> list[str]:
    return sorted(p.name for p in BUILTIN_DIR.iterdir() if (p / "task.toml").is_file())


def builtin_task(task_id: str) -> Task:
    """Load one built-in task.

    Raises:
        NotFound: no built-in task has that id; the message lists them.
    """
    directory = BUILTIN_DIR / task_id
    if not (directory / "task.toml").is_file():
        raise NotFound(f"no built-in task {task_id!r}; known: {', '.join(builtin_task_ids())}")
    task = load_harbor_task(directory, source="builtin")
    return task.model_copy(update={"tests": {**task.tests, "run_tests.py": RUNNER.read_text()}})


def builtin_tasks() -> list[Task]:
    return [builtin_task(task_id) for task_id in builtin_task_ids()]
