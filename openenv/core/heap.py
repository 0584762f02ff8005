"""Give freed heap back to the operating system once a server goes idle.

A proxy that served a thousand sessions frees their objects when they close, but glibc's malloc keeps
the freed pages mapped (each thread's arena, and the main heap below its top chunk) for the next
allocation: measured in docs/benchmarks.md section 11, the proxy's RSS stayed at 2.36x its start after
every session had closed, with only ~15% of the growth still reachable from Python. `malloc_trim(0)`
returns every whole free page of every arena; it takes ~20 ms for a few hundred MB, so callers run it
when idle, not per request. It also empties CPython's own small-object pools that a few survivors keep
mapped (`core.pymalloc`). Other C libraries (musl, macOS) have no such call: there `trim()` is a no-op.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc
import sys
from collections.abc import Callable

from openenv.core.pymalloc import release_empty_pools

__all__ = ["trim"]


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        fn = libc.malloc_trim
    except (OSError, AttributeError):  # musl and others: no malloc_trim
        return None
    fn.argtypes = [ctypes.c_size_t]
    fn.restype = ctypes.c_int
    return fn


def trim(*, collect: bool = True) -> bool:
    """Collect cyclic garbage (unless `collect` is False), then hand whole free heap pages back to the
    OS: glibc's (`malloc_trim`) and the empty pools of CPython's small-object arenas
    (`core.pymalloc.release_empty_pools`). Returns whether the C library could trim (False is not an
    error)."""
    if collect:
        gc.collect()
    release_empty_pools()
    fn = _malloc_trim()
    if fn is None:
        return False
    fn(0)
    return True
