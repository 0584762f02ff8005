"""Task sets by name: `builtin`, a Harbor folder (one task or a folder of tasks), or a datasets table."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from openenv.errors import NotFound
from openenv.harness.tasks.builtin import builtin_task, builtin_task_ids, builtin_tasks
from openenv.harness.tasks.dataset import load_dataset_tasks
from openenv.harness.tasks.harbor import load_harbor_task
from openenv.harness.tasks.harbor_registry import is_dataset_spec, resolve_dataset
from openenv.harness.tasks.model import Task

__all__ = ["SERVED_TASK_SETS_ENV", "find_task", "load_task_set", "served_task_sets"]

SERVED_TASK_SETS_ENV = "OPENENV_TASK_SETS"


def served_task_sets() -> list[str]:
    """The task sets a server's clients may name (reset's `task_set`, MCP's `run_episode`/`list_tasks`):
    `builtin` plus those the operator lists, comma-separated, in `$OPENENV_TASK_SETS` (`openenv serve
    --task-set`). A network client never names a path of its own: a folder it picks could hold a task
    whose commands it wrote (docs/security.md)."""
    listed = [s.strip() for s in os.environ.get(SERVED_TASK_SETS_ENV, "").split(",") if s.strip()]
    return list(dict.fromkeys(["builtin", *listed]))


def load_task_set(name: str = "builtin") -> list[Task]:
    """Load a task set.

    Args:
        name: `builtin`; a Harbor task folder or a folder of them; a `.parquet`/`.jsonl` file; a Harbor
            dataset `NAME@VERSION` (from the registry in `$OPENENV_HARBOR_REGISTRY`, else Harbor's
            public one; see `harbor_registry`); or a Hugging Face Hub dataset id.
    """
    if name == "builtin":
        return builtin_tasks()
    path = Path(name)
    if path.is_dir():
        if (path / "task.toml").is_file():
            return [load_harbor_task(path)]
        return [load_harbor_task(p) for p in sorted(path.iterdir()) if (p / "task.toml").is_file()]
    if path.is_file():
        return load_dataset_tasks(name)
    if is_dataset_spec(name):  # a Harbor dataset by name and version, through the Harbor registry
        return [load_harbor_task(folder) for folder in resolve_dataset(name, progress=_say)]
    _check_hub_id(name)  # nothing here by that name: only a Hub id, asked for by name, goes to the network
    return load_dataset_tasks(name)


def _say(line: str) -> None:
    print(f"[openenv] {line}", file=sys.stderr, flush=True)  # fetching a dataset's tasks takes a while


_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*")


def _check_hub_id(name: str) -> None:
    """Refuse, without touching the network, a name that is neither here nor a Hub dataset id to fetch.

    Raises:
        NotFound: a path that does not exist, a bare word that is no set, or a Hub id while offline.
    """
    kinds = "builtin, a Harbor task folder, a .parquet/.jsonl file, or a Hub dataset id (org/name)"
    if (
        name.startswith(("/", ".", "~"))
        or Path(name).suffix in (".parquet", ".jsonl", ".json")
        or not _HUB_ID.fullmatch(name)
    ):
        what = "no such file or folder" if "/" in name or Path(name).suffix else "no task set by that name"
        raise NotFound(f"task set {name!r}: {what}; a task set is {kinds}")
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        raise NotFound(
            f"task set {name!r} is not a local file or folder, and HF_HUB_OFFLINE is set, so the Hub "
            "dataset of that name is not fetched"
        )


def find_task(task_id: str, task_set: str = "builtin") -> Task:
    """One task of a set by id.

    Raises:
        NotFound: the set has no such id; the message lists the ids it has.
    """
    if task_set == "builtin" and task_id in builtin_task_ids():
        return builtin_task(task_id)  # one folder read, not the whole set (every episode asks)
    tasks = load_task_set(task_set)
    for task in tasks:
        if task.id == task_id:
            return task
    raise NotFound(f"task set {task_set!r} has no task {task_id!r}; it has: {', '.join(t.id for t in tasks)}")
