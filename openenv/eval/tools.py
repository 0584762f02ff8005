"""The harness environment's agent-facing MCP tools: list what can run, run an episode, read its log.

Served at `/mcp` of every harness env server (see `openenv.server.mcp`). An MCP client (an agent, an
IDE) can evaluate a harness without speaking the reset/step control plane: `run_episode` runs a whole
episode in-process and returns the reward and a summary; `get_trajectory` returns its full log.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from openenv.capture.backends.named import BackendName
from openenv.errors import BadRequest, NotFound
from openenv.eval.episodes import EpisodeRequest, EvalEpisodeResult, run_recorded_episode
from openenv.export.log import EpisodeLog, read_episode
from openenv.harness.episode_settings import fold_words
from openenv.harness.summary import Policy
from openenv.harness.tasks.sets import served_task_sets
from openenv.paths import safe_name

__all__ = ["HarnessInfo", "HarnessTools", "TaskInfo", "harness_tools"]

_EPISODE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class TaskInfo(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    instruction: str


class HarnessInfo(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    version: str
    dialect: str
    installed: bool


class HarnessTools:
    """The four tools, bound to a folder where episode logs are written (and read back by id).

    Args:
        harness: the default harness of `run_episode` (a per-harness env server sets its own).
        out_dir: where logs go; default `$OPENENV_EPISODES_DIR` or `artifacts/episodes`.
    """

    def __init__(self, harness: str | None = None, out_dir: Path | None = None) -> None:
        self.default_harness = harness
        self.out_dir = out_dir or Path(os.environ.get("OPENENV_EPISODES_DIR", "artifacts/episodes"))

    def tools(self) -> list[Callable[..., Any]]:
        return [self.list_tasks, self.list_harnesses, self.run_episode, self.get_trajectory]

    def list_tasks(self, task_set: str = "builtin") -> list[TaskInfo]:
        """List the tasks of one of this server's task sets (`builtin`, or one its operator named in
        $OPENENV_TASK_SETS): id and instruction."""
        from openenv.harness.tasks import load_task_set

        return [
            TaskInfo(id=t.id, instruction=t.instruction) for t in load_task_set(_known_task_set(task_set))
        ]

    def list_harnesses(self) -> list[HarnessInfo]:
        """List the coding-agent harnesses this server can run, with pinned version, wire dialect and install status."""
        from openenv.harness.catalog import get_spec, harness_names
        from openenv.harness.install import install_status

        infos = []
        for name in harness_names():
            spec = get_spec(name)
            infos.append(
                HarnessInfo(
                    name=name,
                    version=spec.install.version,
                    dialect=spec.dialect,
                    installed=install_status(spec).ready,
                )
            )
        return infos

    async def run_episode(
        self,
        task: str,
        harness: str | None = None,
        backend: BackendName = "local",
        policy: Policy = "sample",
        task_set: str = "builtin",
        max_tokens: int | None = None,
    ) -> EvalEpisodeResult:
        """Run one whole episode of `harness` on `task` and return its reward and trajectory summary.

        `policy`: `sample` lets the backend (`local` or `vllm`) answer every turn; `oracle` applies the
        task's reference solution through the harness's own tools. Use the returned `episode_id` with
        `get_trajectory` for every turn and token.
        """
        name = harness or self.default_harness
        if name is None:
            raise NotFound("run_episode needs a harness; call list_harnesses for the names")
        words = {
            "harness": _known_harness(name),
            "task": safe_name(task, "task id"),
            "task_set": _known_task_set(task_set),
            "backend": backend,
            "policy": policy,
            "max_tokens": max_tokens,
        }
        request = EpisodeRequest.model_validate(fold_words(words, settings="settings", engine="engine"))
        return await asyncio.to_thread(run_recorded_episode, request, self.out_dir)

    def get_trajectory(self, episode_id: str) -> EpisodeLog:
        """The full log of an episode run by `run_episode`: turns, token sequences, requests and summary."""
        if not _EPISODE_ID.match(episode_id):  # the same plain-name rule as the names log_name makes
            raise NotFound(
                f"{episode_id!r} is not an episode id (letters, digits, '-', '_', '.'; no leading '.')"
            )
        path = self.out_dir / f"{episode_id}.jsonl"
        if not path.is_file():
            raise NotFound(f"no episode {episode_id!r} in {self.out_dir}; run_episode returns the ids")
        return read_episode(path)


def _known_task_set(name: str) -> str:
    known = served_task_sets()
    if name not in known:
        raise BadRequest(
            f"unknown task set {name!r}; this server offers: {', '.join(known)} (its operator adds "
            "more with $OPENENV_TASK_SETS)"
        )
    return name


def _known_harness(name: str) -> str:
    from openenv.harness.catalog import harness_names

    known = harness_names()
    if name not in known:
        raise NotFound(f"unknown harness {name!r}; known harnesses: {', '.join(known)}")
    return name


def harness_tools(env_cls: type) -> list[Callable[..., Any]]:
    """The toolset factory `openenv.server.mcp` uses for `HarnessEnvironment` and its subclasses."""
    return HarnessTools(harness=getattr(env_cls, "harness", None)).tools()
