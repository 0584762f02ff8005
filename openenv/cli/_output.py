"""Where a command's output goes: stdout for its result, stderr for everything said along the way."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

__all__ = ["stdout_to_stderr"]


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Send stdout to stderr while the block runs, Python prints and child processes alike.

    A command whose stdout is its result (`--json`, a trajectory path) stays parseable even when a
    subprocess it starts (the tiny-model build) prints to fd 1.
    """
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
