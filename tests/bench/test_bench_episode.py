"""A batch of openenv episodes is charged with the work they leave behind."""

from __future__ import annotations

import shutil
import sys
import threading
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import bench_episode

from openenv.harness.sandbox import reaper


def test_an_openenv_batch_ends_after_its_sandbox_folders_are_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """openenv's episodes hand their folders to the reaper thread and return. The removal is their CPU:
    the batch must not end (and read its CPU) while it still runs, or the next batch pays for it."""
    release = threading.Event()
    removing = shutil.rmtree

    def slow_rmtree(path: Path, *args: object, **kwargs: object) -> None:
        release.wait(5)  # the reaper is still at it when the episode returns
        removing(path, *args, **kwargs)

    monkeypatch.setattr(reaper.shutil, "rmtree", slow_rmtree)
    folders = []

    def episode() -> dict[str, object]:
        folder = tmp_path / f"sandbox-{len(folders)}"
        (folder / "home").mkdir(parents=True)
        (folder / "home" / "state.db").write_bytes(b"x" * 4096)
        folders.append(folder)
        reaper.remove_later(folder)
        threading.Timer(0.3, release.set).start()
        return {"ok": True, "wall_s": 0.0}

    batch = bench_episode._batch(episode, 1, set(), count_self=True)
    assert len(batch["episodes"]) == 1
    assert not any(tmp_path.iterdir()), list(tmp_path.iterdir())  # removed inside the batch
