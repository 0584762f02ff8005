"""The built-in task set: small, realistic Python repos (fix a bug, implement a function, make tests
pass), stored as real Harbor task folders under `builtin/<id>/` (environment/Dockerfile copying `app/`
to `/app`, tests/test.sh writing /logs/verifier/reward.json) and loaded by the one Harbor loader."""

from __future__ import annotations

from pathlib import Path

from openenv.errors import NotFound
from openenv.harness.tasks.harbor import load_harbor_task
from openenv.harness.tasks.model import Task

__all__ = ["BUILTIN_DIR", "builtin_task", "builtin_task_ids", "builtin_tasks"]

BUILTIN_DIR = Path(__file__).parent / "builtin"


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
    return load_harbor_task(directory, source="builtin")


def builtin_tasks() -> list[Task]:
    return [builtin_task(task_id) for task_id in builtin_task_ids()]
