"""`core.heap.trim`: freed heap goes back to the OS, where plain `free()` keeps it mapped."""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

import psutil
import pytest

from openenv.core.heap import trim

glibc = pytest.mark.skipif(
    not sys.platform.startswith("linux") or "glibc" not in " ".join(__import__("platform").libc_ver()),
    reason="malloc_trim is glibc's",
)


@glibc
def test_trim_returns_pages_that_free_keeps() -> None:
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    libc.memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
    rss = psutil.Process().memory_info
    # 64 MiB in 8 KiB blocks (under the mmap threshold: heap memory), touched so they are resident,
    # then all freed but the last, which pins the heap's top so free() cannot shrink it.
    blocks = [libc.malloc(8192) for _ in range(8192)]
    for b in blocks:
        libc.memset(b, 1, 8192)
    for b in blocks[:-1]:
        libc.free(b)
    kept = rss().rss
    assert trim(collect=False) is True
    given_back = kept - rss().rss
    libc.free(blocks[-1])
    assert given_back > 32 << 20, f"only {given_back >> 20} MiB given back"


def test_trim_is_a_no_op_answer_without_malloc_trim(monkeypatch: pytest.MonkeyPatch) -> None:
    import openenv.core.heap as heap

    monkeypatch.setattr(heap, "_malloc_trim", lambda: None)
    assert heap.trim() is False


@pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason="3.11's method cache keeps the names it caches")
def test_trim_lets_go_of_the_attribute_names_cpythons_method_cache_keeps() -> None:
    """Regression (docs/benchmarks.md 11n): each slot of 3.11's method cache holds the last name looked up
    there. C and Rust code that looks an attribute up by a C string makes the name afresh each time, so
    ~520 names made during a 1,000-session peak lived on, with no Python referrer, in the peak's arenas and
    kept them mapped (RSS 1.061x its start after the release; 1.040x once trim empties the cache)."""

    class Looked:
        pass

    names = ["".join(("attribute_", str(i))) for i in range(1_000)]  # made at run time: not interned
    unlooked = "".join(("attribute_", "never"))
    alone = [sys.getrefcount(n) for n in [unlooked]][0]  # the list's, the loop's and the call's references
    for name in names:
        getattr(Looked, name, None)
    held = sum(sys.getrefcount(n) > alone for n in names)
    assert held > 100, f"the method cache keeps only {held} of the 1,000 names looked up"
    trim(collect=False)
    assert [n for n in names if sys.getrefcount(n) > alone] == []
