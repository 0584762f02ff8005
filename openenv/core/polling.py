"""`settle`: read a value until it is done or a deadline passes; the soak's accounting waits this way."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

__all__ = ["settle"]

T = TypeVar("T")


def settle(read: Callable[[], T], done: Callable[[T], bool], wait_s: float, interval_s: float = 0.05) -> T:
    """`read()` every `interval_s` until `done` says so or `wait_s` has passed; the last value read."""
    deadline = time.monotonic() + wait_s
    while True:
        value = read()
        if done(value) or time.monotonic() > deadline:
            return value
        time.sleep(interval_s)
