"""Sandbox folders removed off the episode's path: renamed at once, unlinked on a background thread.

Unlinking a finished sandbox's folder is file-system work that nothing waits for: codex leaves a HOME of
~140 files (SQLite databases and their logs) that took 11-13 ms of every episode's wall time to remove,
as long as its two model turns took to answer. `remove_later` renames the folder (same file system: atomic)
so it is gone from its path when `close()` returns, and one daemon thread removes it. Whatever is still
queued when the interpreter exits is removed by an `atexit` hook before it does, so nothing is left in
the temp folder by a clean exit. Only folders whose processes have all been killed are handed over.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import queue
import shutil
import threading
import uuid
from pathlib import Path

__all__ = ["drain", "remove_later"]

_queue: queue.Queue[Path] = queue.Queue()
_lock = threading.Lock()
_thread: threading.Thread | None = None


def _work() -> None:
    while True:
        path = _queue.get()
        try:
            shutil.rmtree(path, ignore_errors=True)
        finally:
            _queue.task_done()


def remove_later(path: Path) -> None:
    """Take `path` away now and remove it in the background; removed here and now if it cannot be
    renamed (then nothing is left half-done)."""
    global _thread
    doomed = path.with_name(f"{path.name}.closed-{uuid.uuid4().hex[:8]}")
    try:
        os.rename(path, doomed)
    except FileNotFoundError:
        return
    except OSError:
        shutil.rmtree(path, ignore_errors=True)
        return
    with _lock:
        if _thread is None or not _thread.is_alive():
            _thread = threading.Thread(target=_work, name="sandbox-reaper", daemon=True)
            _thread.start()
    _queue.put(doomed)


def drain() -> None:
    """Block until every folder handed over so far is removed (at exit; tests)."""
    if _thread is None or not _thread.is_alive():  # e.g. after a fork: remove them on this thread
        with contextlib.suppress(queue.Empty):
            while True:
                shutil.rmtree(_queue.get_nowait(), ignore_errors=True)
                _queue.task_done()
        return
    _queue.join()


atexit.register(drain)
