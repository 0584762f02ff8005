"""`quiet_progress`: transformers' own progress bars off for one block.

transformers draws `Loading weights` and `Writing model shards` bars on stderr. In `openenv run` they land
in the middle of its own progress lines, where they read like a second job (or a failure); loading or
building a model is ours to report. The caller's setting is restored afterwards.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["quiet_progress"]


@contextmanager
def quiet_progress() -> Iterator[None]:
    from transformers.utils import logging as hf_logging

    shown = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if shown:
            hf_logging.enable_progress_bar()
