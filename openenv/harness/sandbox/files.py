"""Host-side file work on a sandbox's folders, shared by both sandboxes: staging Harbor's folders
(`/tests`, `/solution`, `/logs/verifier`) and reading back what the agent left, never through a link.

The agent controls everything under a sandbox's root while it runs; each helper here assumes that a
link, a fifo or a device may be waiting where a plain file or folder was.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path

from openenv.harness.tasks.model import FileData
from openenv.paths import safe_join

__all__ = ["copy_plain", "drop_links", "empty_folder", "write_tree"]


def write_tree(base: Path, files: Mapping[str, FileData], *, mode: int | None = None) -> None:
    """Write `files` (relative path -> text or bytes) under `base`, each path checked right before its
    write (`safe_join`: no `..`, no link leading out); `mode` is applied to every file written."""
    base.mkdir(parents=True, exist_ok=True)
    for relative, data in files.items():
        path = safe_join(base, relative)
        path.parent.mkdir(parents=True, exist_ok=True)
        path = safe_join(base, relative)  # checked again: mkdir may have met a link
        if isinstance(data, bytes):
            path.write_bytes(data)
        else:
            path.write_text(data)
        if mode is not None:
            path.chmod(mode)


def empty_folder(folder: Path) -> None:
    """Empty `folder` in place (a bind mount of it keeps pointing at it), mode 0755. Links are removed,
    never followed; a link standing where the folder was is replaced by a folder."""
    if folder.is_symlink():
        folder.unlink()
    if not folder.is_dir():
        folder.mkdir(parents=True)
    for entry in os.scandir(folder):
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path)
        else:
            os.unlink(entry.path)
    os.chmod(folder, 0o755)


def drop_links(root: Path) -> None:
    """Delete symlinks and special files under `root`, leaving plain files and folders."""
    for folder, dirs, files in os.walk(root, followlinks=False):
        for name in [*dirs, *files]:
            path = Path(folder) / name
            if path.is_symlink() or not (path.is_dir() or path.is_file()):
                path.unlink(missing_ok=True)


def copy_plain(src: Path, dst: Path) -> None:
    """Copy a tree keeping symlinks as links and skipping fifos, sockets and devices (a fifo blocks a copy)."""

    def specials(folder: str, names: list[str]) -> set[str]:
        paths = {name: Path(folder) / name for name in names}
        return {n for n, p in paths.items() if not (p.is_symlink() or p.is_dir() or p.is_file())}

    shutil.copytree(src, dst, symlinks=True, ignore=specials, dirs_exist_ok=True)
