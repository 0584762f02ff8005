"""A task's solution as edit blocks, for harnesses that change files only through blocks in their reply
text (aider's SEARCH/REPLACE "diff" edit format) instead of a shell tool.

The reference solution is a script (`solve.sh`), so the files it writes are found by running it: in a
local sandbox of its own (bubblewrap, loopback only, the task's workspace at the workdir and solution/ at
/solution, as `apply_solution` does), never on this machine directly. Each changed or new text file then
becomes one block whose SEARCH part is the file's whole old text (empty for a new file), which the
harness matches exactly and replaces. A deletion or a binary file has no block: `EditsUnavailable`.
"""

from __future__ import annotations

import re

from openenv.errors import BadRequest
from openenv.harness.tasks.model import Task

__all__ = ["EditsUnavailable", "aider_diff_blocks", "changed_files", "solved_workspace"]

FENCE = "```"


class EditsUnavailable(BadRequest):
    """The solution's effect cannot be written as edit blocks (it deletes a file, writes bytes, or its
    environment exists only as an image build)."""


def _text(data: str | bytes) -> str | None:
    if isinstance(data, str):
        return data
    try:
        return data.decode()
    except UnicodeDecodeError:
        return None


def solved_workspace(task: Task, *, timeout_s: float = 120) -> dict[str, bytes]:
    """The workdir's files after the task's solution ran, from a throw-away local sandbox.

    Raises:
        EditsUnavailable: the task needs an image build, or its solution failed there.
    """
    from openenv.harness.sandbox import LocalSandbox
    from openenv.harness.solution import apply_solution

    if task.needs_build():
        raise EditsUnavailable(
            f"task {task.id!r} needs an image build; its solution cannot be replayed locally"
        )
    with LocalSandbox(workdir=task.workdir) as box:
        box.stage(box.workdir, dict(task.workspace), readonly=False)
        result = apply_solution(box, task, timeout_s=timeout_s)
        if result.exit_code != 0:
            raise EditsUnavailable(
                f"task {task.id!r}'s solution exited {result.exit_code} in a local sandbox: "
                f"{result.output[-500:]}"
            )
        root = box.host_path(box.workdir)
        return {
            path.relative_to(root).as_posix(): path.read_bytes()
            for path in sorted(root.rglob("*"))
            if path.is_file() and not path.is_symlink()
        }


def changed_files(before: dict[str, str | bytes], after: dict[str, bytes]) -> dict[str, tuple[str, str]]:
    """path -> (old text, new text) for every file the solution created or changed.

    Raises:
        EditsUnavailable: a file was deleted, or a changed file is not UTF-8 text.
    """
    if deleted := sorted(set(before) - set(after)):
        raise EditsUnavailable(f"the solution deletes {', '.join(deleted)}; edit blocks cannot delete a file")
    changes: dict[str, tuple[str, str]] = {}
    for path, data in after.items():
        old = before.get(path)
        if old is not None and (old.encode() if isinstance(old, str) else old) == data:
            continue
        old_text, new_text = ("" if old is None else _text(old)), _text(data)
        if old_text is None or new_text is None:
            raise EditsUnavailable(f"the solution writes bytes to {path}; edit blocks carry text only")
        changes[path] = (old_text, new_text)
    return changes


# Aider's block markers (aider/coders/editblock_coder.py): a file line like these would end a block early.
_MARKER = re.compile(r"^(<{5,9} SEARCH>?|={5,9}|>{5,9} REPLACE)\s*$", re.MULTILINE)


def aider_diff_blocks(changes: dict[str, tuple[str, str]]) -> str:
    """Aider's "diff" edit format: per file, its path on a line of its own, then a fenced
    `<<<<<<< SEARCH` / `=======` / `>>>>>>> REPLACE` block; an empty SEARCH creates the file.

    Raises:
        EditsUnavailable: a file has a line aider would read as a block marker (e.g. `=======`).
    """
    blocks = []
    for path, (old, new) in sorted(changes.items()):
        if _MARKER.search(old) or _MARKER.search(new):
            raise EditsUnavailable(f"{path} has a line aider reads as an edit-block marker")
        search = old if not old or old.endswith("\n") else old + "\n"
        replace = new if not new or new.endswith("\n") else new + "\n"
        blocks.append(
            f"{path}\n{FENCE}\n<<<<<<< SEARCH\n{search}=======\n{replace}>>>>>>> REPLACE\n{FENCE}\n"
        )
    return "\n".join(blocks)
