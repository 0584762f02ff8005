"""The one escape check for names that come from outside: file keys, task ids, episode ids.

A workspace key in a task (`{"src/app.py": "..."}`), a task id over the wire or an episode id in an MCP
call is chosen by someone we do not trust (a network client, a task file, the policy). Joined to a
folder naively, `/tmp/x`, `../../../../tmp/x` or a symlink planted by the harness writes anywhere the
server can. Every such join goes through `safe_join`; every such name through `safe_relpath` or
`safe_name`. `write_atomic` is how a file we record lands on disk: whole or not at all.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from pathlib import Path, PurePosixPath

from openenv.errors import BadRequest

__all__ = ["safe_join", "safe_name", "safe_relpath", "write_atomic"]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_MAX_KEY = 4096


def safe_relpath(key: str) -> PurePosixPath:
    """A relative POSIX path that stays below whatever folder it is joined to.

    Raises:
        BadRequest: `key` is empty, absolute, has a `..` part, a NUL byte or a backslash (a separator
            on Windows, and never needed in the keys we accept), or is longer than 4096 characters.
    """
    if not isinstance(key, str) or not key:
        raise BadRequest(f"a file key must be a non-empty string, got {key!r}", key=repr(key))
    if len(key) > _MAX_KEY:
        raise BadRequest(f"file key is {len(key)} characters long; at most {_MAX_KEY}", key=key[:80])
    if "\x00" in key:
        raise BadRequest(f"file key {key!r} contains a NUL byte", key=key)
    if "\\" in key:
        raise BadRequest(f"file key {key!r} contains a backslash; use '/' between folders", key=key)
    path = PurePosixPath(key)
    if path.is_absolute():
        raise BadRequest(f"file key {key!r} is absolute; keys are relative to their folder", key=key)
    if ".." in path.parts:
        raise BadRequest(f"file key {key!r} has a '..' part; keys may not leave their folder", key=key)
    if not path.parts:
        raise BadRequest(f"file key {key!r} names no file", key=key)
    return path


def safe_join(root: Path, key: str) -> Path:
    """`root / key`, refused when `key` is not a safe relative path or (when `root` exists) when the
    result, with every symlink that exists resolved, lies outside `root`.

    The symlink check answers a workspace the agent already touched (a `tests -> /etc` link planted for
    the grader's writes); it follows links as they are now, so call it right before the write.

    Raises:
        BadRequest: the key escapes `root`.
    """
    rel = safe_relpath(key)
    path = Path(root) / rel
    if Path(root).exists():
        base = Path(root).resolve()
        if not path.resolve().is_relative_to(base):
            raise BadRequest(f"file key {key!r} leads outside {root} through a symlink", key=key)
    return path


def safe_name(name: str, what: str = "name") -> str:
    """A single path component made of letters, digits, `_`, `.` and `-`, not starting with `.` or `-`
    (a task id, an episode id, a harness or task-set name used in a file name).

    Raises:
        BadRequest: anything else (`../x`, `a/b`, `.env`, empty), naming `what` it was.
    """
    if not isinstance(name, str) or not _NAME.match(name) or len(name) > 255:
        raise BadRequest(
            f"{what} {name!r} is not a plain name (letters, digits, '_', '.', '-'; no "
            "leading '.' or '-', no '/')",
            **{what.replace(" ", "_"): repr(name)[:80]},
        )
    return name


def write_atomic(path: Path, data: str | bytes) -> Path:
    """Write `data` to `path` whole or not at all: a temp file in the same folder, fsynced, then
    `os.replace`d over `path` and the folder fsynced. A crash leaves the old file or the new one,
    never a truncated one (the failure `openenv export` used to abort on)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = data.encode() if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(raw)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)
    return path


def _fsync_dir(folder: Path) -> None:
    """Make the rename itself durable (POSIX: a directory entry is data of its folder)."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
