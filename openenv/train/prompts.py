"""The prompt format of a training dataset: each prompt names a task, and optionally its harness.

A GRPO dataset row is a plain string, `"<task-id>"` or `"<harness>:<task-id>"`, e.g.
`"pi:fix-binary-search"`. The rollout resolves the task in its task set; the harness comes from the
prompt when it names one, else from the harness mix. Strings keep TRL's prompt column untouched
(no chat template is applied to it: the harness writes the real prompt).
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from openenv.errors import BadRequest

__all__ = ["TaskPrompt", "parse_prompt", "task_dataset"]


class TaskPrompt(BaseModel):
    """A parsed prompt: the task id and the harness it pins (None: the mix decides)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    task: str
    harness: str | None = None

    def __str__(self) -> str:
        return f"{self.harness}:{self.task}" if self.harness else self.task


def parse_prompt(prompt: object) -> TaskPrompt:
    """Read one dataset prompt.

    Raises:
        BadRequest: the prompt is not a string of the form `task` or `harness:task`.
    """
    if not isinstance(prompt, str) or not prompt.strip():
        raise BadRequest(f"a training prompt must be a string 'task' or 'harness:task'; got {prompt!r}")
    harness, sep, task = prompt.strip().rpartition(":")
    if sep and (not harness or not task):
        raise BadRequest(f"a training prompt must look like 'harness:task'; got {prompt!r}")
    return TaskPrompt(task=task, harness=harness or None)


def task_dataset(tasks: Sequence[str], *, harness: str | None = None, repeat: int = 1) -> object:
    """A `datasets.Dataset` with one `prompt` per task (repeated `repeat` times), for `GRPOTrainer`."""
    from datasets import Dataset

    prompts = [str(TaskPrompt(task=t, harness=harness)) for t in tasks] * repeat
    return Dataset.from_dict({"prompt": prompts})
