"""A closed sandbox's folder leaves its path at once and is removed off the caller's thread, and nothing
handed over is left behind when the process exits."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from openenv.harness.sandbox import LocalSandbox, reaper

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the local sandbox runs as root here")


def test_close_removes_the_folder_off_the_callers_thread(monkeypatch):
    removed_on: list[tuple[str, str]] = []
    rmtree = shutil.rmtree

    def recording(path, *args, **kwargs):
        removed_on.append((str(path), threading.current_thread().name))
        return rmtree(path, *args, **kwargs)

    monkeypatch.setattr(reaper.shutil, "rmtree", recording)
    box = LocalSandbox()
    box.write_files({"notes.txt": "x" * 4096, "deep/a/b/c.txt": "y"})
    root = box.root
    box.close()
    assert not root.exists()  # gone from its path when close() returns
    reaper.drain()
    assert removed_on and all(thread != threading.current_thread().name for _, thread in removed_on)
    assert not list(root.parent.glob(f"{root.name}.closed-*"))  # and then removed for good


def test_folders_still_queued_at_exit_are_removed_before_the_process_ends(tmp_path):
    """The reaper is a daemon thread; a process that closes sandboxes and exits at once still leaves
    nothing in the temp folder (its `atexit` hook removes what is queued)."""
    script = (
        "from openenv.harness.sandbox import LocalSandbox\n"
        "for _ in range(5):\n"
        "    box = LocalSandbox()\n"
        "    box.write_files({f'f{i}.txt': 'x' for i in range(200)})\n"
        "    box.close()\n"
    )
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in Path(tmp_path).iterdir()) == []
