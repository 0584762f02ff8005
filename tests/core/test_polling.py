"""`settle`: the last value read, as soon as it is done, or once the wait is over."""

from __future__ import annotations

import time

from openenv.core.polling import settle


def test_it_returns_the_first_value_that_is_done_without_waiting_longer() -> None:
    reads = iter(range(100))
    start = time.monotonic()
    assert settle(lambda: next(reads), lambda n: n == 3, wait_s=5, interval_s=0.01) == 3
    assert time.monotonic() - start < 1


def test_past_the_wait_it_returns_the_last_value_read_even_if_not_done() -> None:
    reads = iter(range(1000))
    start = time.monotonic()
    value = settle(lambda: next(reads), lambda n: False, wait_s=0.2, interval_s=0.01)
    assert 0.2 <= time.monotonic() - start < 1.5 and value >= 5
