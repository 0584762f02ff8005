"""A task's reference solution run in a sandbox, as Harbor's oracle agent runs it (no harness).

Its own module because the oracle policy and the edit-block replay (`edit_blocks`, which the oracle
uses) both run it.
"""

from __future__ import annotations

from openenv.errors import BadRequest
from openenv.harness.sandbox.base import CommandResult, Sandbox
from openenv.harness.tasks.model import Task

__all__ = ["apply_solution"]


def apply_solution(sandbox: Sandbox, task: Task, *, timeout_s: float = 600) -> CommandResult:
    """Run the task's solution in the sandbox as Harbor's oracle agent does, without a harness: the
    solution/ folder staged read-only at /solution, `solve.sh` run from the workdir with `[solution].env`.

    Raises:
        BadRequest: the task has no solution.
    """
    if task.solution is None:
        raise BadRequest(f"task {task.id!r} has no solution/solve.sh, so the oracle cannot solve it")
    sandbox.stage("/solution", dict(task.solution_files or {"solve.sh": task.solution}), readonly=True)
    return sandbox.run(
        ["bash", "/solution/solve.sh"],
        env={**task.env, **task.solution_env},
        timeout_s=timeout_s,
        cwd=sandbox.workdir,
    )
