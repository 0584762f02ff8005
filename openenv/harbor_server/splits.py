"""The Task API's data: each `--tasks SPEC` of `openenv serve harbor` is one split, named by its spec.

A split is any task set `openenv tasks` accepts (`builtin`, a Harbor task folder or a folder of them, a
parquet/jsonl file, a Hub id), loaded once at start: the Task API is on every trainer's hot path and
must not re-read a dataset per request, and a mistyped spec should fail the server's start, not the
first rollout. Tasks keep the set's own order, so an index names the same task for the server's life.

What discovery reveals (docs/interop.md): per task its index, id (the folder name, never a host
path), name and instruction (the prompt, cut at `INSTRUCTION_PREVIEW` characters). Tests, solutions
and files stay on the server.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from openenv.errors import BadRequest, NotFound
from openenv.harbor_server.wire import HarborTaskRef
from openenv.harness.tasks import Task, load_task_set

__all__ = ["INSTRUCTION_PREVIEW", "Splits"]

INSTRUCTION_PREVIEW = 4000


@dataclass(frozen=True)
class Splits:
    """The served task sets, by split name (the spec as given on the command line)."""

    sets: dict[str, list[Task]]

    @classmethod
    def load(cls, specs: list[str]) -> Splits:
        """Load every spec now.

        Raises:
            BadRequest: no spec, the same spec twice, or a spec that names no task set (the loader's
                message says why).
        """
        if not specs:
            raise BadRequest(
                "serve harbor needs at least one --tasks SPEC (a Harbor task folder, `builtin`, ...)"
            )
        sets: dict[str, list[Task]] = {}
        for spec in specs:
            name = spec  # as given: a split name is what the operator typed, not a resolved host path
            if name in sets:
                raise BadRequest(f"--tasks {spec!r} is given twice")
            tasks = load_task_set(str(Path(spec).resolve()) if Path(spec).exists() else spec)
            if not tasks:
                raise BadRequest(f"--tasks {spec!r} holds no task")
            sets[name] = tasks
        return cls(sets)

    @property
    def names(self) -> list[str]:
        return list(self.sets)

    def split(self, name: str) -> str:
        """The split a request means: `""` is the first (the reference's rule).

        Raises:
            NotFound: no such split; the message lists the served ones.
        """
        if not name:
            return self.names[0]
        if name not in self.sets:
            raise NotFound(f"unknown split {name!r}; this server serves: {', '.join(self.names)}")
        return name

    def task(self, split: str, index: int) -> Task:
        """The task at `index` of `split`.

        Raises:
            NotFound: unknown split. IndexError: index out of range (the Task API answers 400).
        """
        tasks = self.sets[self.split(split)]
        if not 0 <= index < len(tasks):
            raise IndexError(
                f"task index {index} is out of range for split {self.split(split)!r} ({len(tasks)} tasks)"
            )
        return tasks[index]

    def ref(self, split: str, index: int) -> HarborTaskRef:
        name = self.split(split)
        task = self.task(name, index)
        return _ref(name, index, task)

    def refs(self, split: str, start: int | None = None, stop: int | None = None) -> list[HarborTaskRef]:
        name = self.split(split)
        tasks = self.sets[name]
        return [_ref(name, i, tasks[i]) for i in range(len(tasks))[start:stop]]

    def listing(self) -> list[dict[str, object]]:
        """`GET /harbor_env/splits`: each split with its task count."""
        return [{"name": name, "num_tasks": len(tasks)} for name, tasks in self.sets.items()]


def _ref(split: str, index: int, task: Task) -> HarborTaskRef:
    text = task.instruction.strip()
    if len(text) > INSTRUCTION_PREVIEW:
        text = text[:INSTRUCTION_PREVIEW] + "\n…"
    return HarborTaskRef(index=index, task_id=task.id, task_name=task.id, dataset=split, instruction=text)
