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


def _clear_type_cache() -> None:
    """Empty CPython's method cache. On 3.11 each of its 4,096 slots keeps a strong reference to the last
    attribute name looked up there, and a name that C or Rust code makes afresh for each lookup (a
    `PyObject_CallMethod(obj, "search", ...)`) then lives on with no Python referrer: after 1,000 sessions,
    ~520 such strings, made during the peak and so in its arenas, kept those arenas mapped
    (docs/benchmarks.md 11n). The cache refills on the next lookups."""
    if sys.version_info < (3, 13):  # 3.13 deprecates it (`_clear_internal_caches`)
        sys._clear_type_cache()


def trim(*, collect: bool = True) -> bool:
    """Collect cyclic garbage (unless `collect` is False), then hand whole free heap pages back to the
    OS: glibc's (`malloc_trim`) and the empty pools of CPython's small-object arenas
    (`core.pymalloc.release_empty_pools`), after letting go of the attribute names CPython's method cache
    holds (`_clear_type_cache`). Returns whether the C library could trim (False is not an error)."""
    _clear_type_cache()
    if collect:
        gc.collect()
    release_empty_pools()
    fn = _malloc_trim()
    if fn is None:
        return False
    fn(0)
    return True
