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

__all__ = ["HostFolders", "copy_plain", "drop_links", "empty_folder", "write_tree"]


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


class HostFolders:
    """The host side of a sandbox's folders, the same for both sandboxes: where the workspace, HOME and
    private folders are under `root`, and the one escape check (`safe_join`: no `..`, no link leading out)
    on everything the host writes or reads there for the `Sandbox` protocol.

    A sandbox supplies `root` and `hand_over` (giving its uid a folder it must write in); `host_path`
    maps a container path to its host folder.
    """

    root: Path

    def hand_over(self, path: Path) -> None:
        """Give the sandbox's uid `path` and all below it, never following a link the agent planted."""
        raise NotImplementedError

    def host_path(self, container_path: str) -> Path:
        raise NotImplementedError

    @property
    def workspace(self) -> Path:
        return self.root / "workspace"

    @property
    def home(self) -> Path:
        return self.root / "home"

    def private_dir(self, name: str) -> Path:
        """A folder outside everything the agent is shown (hidden tests), owned by the sandbox's uid."""
        path = self.root / "private" / name
        path.mkdir(parents=True, exist_ok=True)
        self.hand_over(path)
        return path

    def write_files(self, files: Mapping[str, FileData], *, under: Path | None = None) -> None:
        base = under or self.workspace
        write_tree(base, files)
        self.hand_over(base)

    def read_file(self, relative: str) -> str:
        """A workspace file's text, refused (`BadRequest`) when `relative` or a link the agent planted
        leads out of the workspace: the host never reads through one."""
        return safe_join(self.workspace, relative).read_text()

    def fresh_dir(self, container_path: str) -> Path:
        """Empty `container_path`'s host folder in place (its bind mount keeps pointing at it) and hand it
        to the sandbox's uid: nothing planted there survives, links are removed, never followed."""
        folder = self.host_path(container_path)
        empty_folder(folder)
        self.hand_over(folder)
        return folder

    def fresh_home(self) -> str:
        """An empty HOME (with `tmp/` for TMPDIR) that no agent process ever saw, for the verifier: a
        `~/.gitconfig` or `~/.local` hook the agent planted in its own HOME must not run in the tests."""
        path = self.root / "grader"
        empty_folder(path)
        (path / "tmp").mkdir()
        self.hand_over(path)
        return str(path)
