"""What the episodes of an `openenv eval` folder did: how their tool calls were written, the commands they ran,
and what came of them. Split from `learn.py`, which re-exports these with the stages that use them."""

from __future__ import annotations

import json
import re
from pathlib import Path

from openenv.harness.tasks.fileops import kind_of

__all__ = ["append_commands", "call_forms", "look_outcomes"]


def call_forms(eval_folder: Path) -> dict[str, int]:
    """How the tool calls of an `openenv eval` folder's episodes were written, as the model sampled them: their
    arguments with the template's separators (`{"command": "`), compact (`{"command":"`, pi's echo), or other."""
    from openenv.export.log import read_episode

    counts = {"spaced": 0, "compact": 0, "other": 0}
    for path in sorted((eval_folder / "episodes").glob("*.jsonl")):
        for turn in read_episode(path).turns:
            for call in turn.completion.tool_calls if turn.completion else ():
                text = call.arguments
                counts[
                    "spaced"
                    if text.startswith('{"command": "')
                    else "compact"
                    if text.startswith('{"command":"')
                    else "other"
                ] += 1
    return counts


def _episode_commands(eval_folder: Path) -> list[tuple[str, float, list[str]]]:
    """Each episode of an `openenv eval` folder as (task id, reward, the commands it ran, in order), each command
    read where its harness's shell tool puts it (pi's `command`, codex's `cmd`)."""
    from openenv.export.log import read_episode
    from openenv.harness.catalog import get_spec

    report = json.loads((eval_folder / "results.json").read_text())
    rows = []
    for episode in report["episodes"]:
        summary = episode["summary"]
        tool = get_spec(str(summary.get("harness") or "pi")).shell_tool
        log = read_episode(
            eval_folder / "episodes" / Path(episode["trajectory"]).name
        )  # the folder may have moved
        calls = [call for turn in log.turns if turn.completion for call in turn.completion.tool_calls]
        commands = [tool.command_in(call.parsed_arguments()) for call in calls]
        rows.append((str(summary["task"]), float(summary.get("reward") or 0.0), commands))
    return rows


def _first_commands(eval_folder: Path) -> list[tuple[str, float, str]]:
    """Each episode of an `openenv eval` folder as (task id, reward, the first command it ran; "" when none)."""
    return [
        (task, reward, commands[0] if commands else "")
        for task, reward, commands in _episode_commands(eval_folder)
    ]


def append_commands(eval_folder: Path) -> dict[str, int]:
    """How the `append` episodes of an `openenv eval` folder wrote: the first command each episode ran, counted
    as `append` (`>>`), `overwrite` (`>` alone) or `other` (neither, or no tool call). The imperfect teacher's error
    is the second, so this is what GRPO from its SFT model has to change."""
    counts = {"append": 0, "overwrite": 0, "other": 0}
    for task, _, command in _first_commands(eval_folder):
        if kind_of(task) == "append":
            counts[
                "append"
                if ">>" in command
                else "overwrite"
                if re.search(r"(^|[^>])>([^>]|$)", command)
                else "other"
            ] += 1
    return counts


def look_outcomes(eval_folder: Path) -> dict[str, list[int]]:
    """The episodes of an `openenv eval` folder by whether they `looked` (listed the workspace with `ls`, before or
    after acting) or only `acted`, each as [solved, episodes]: whether the extra call the shaping stage's
    demonstrations teach is harmless to this model."""
    counts = {"looked": [0, 0], "acted": [0, 0]}
    for _, reward, commands in _episode_commands(eval_folder):
        row = counts["looked" if any(c.split()[:1] == ["ls"] for c in commands) else "acted"]
        row[0] += int(reward >= 1.0)
        row[1] += 1
    return counts
