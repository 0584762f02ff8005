"""`core.pymalloc.release_empty_pools`: empty pools of partly used arenas go back to the OS, and the
allocator keeps working on them.

The pattern is the proxy's after a peak (docs/benchmarks.md 11d): many small objects made, nearly all
freed, a few kept. pymalloc returns an arena only when all of it is empty, so the few kept ones hold
every arena mapped; neither `gc.collect` nor glibc's `malloc_trim` can give any of it back.
"""

from __future__ import annotations

import gc
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil
import pytest

from openenv.core import pymalloc
from openenv.core.heap import trim
from openenv.core.pymalloc import release_empty_pools, supported

needs_pymalloc = pytest.mark.skipif(not supported(), reason="reads CPython 3.11's pymalloc on Linux")

PEAK = 400_000  # ~30 MiB of small strings
KEEP_EVERY = 400  # 1,000 survivors, spread over every arena of the peak


def _in_a_fresh_interpreter(body: str) -> None:
    """Run this module's `body()` in a new interpreter: the release acts only while no other Python
    thread may run, and a test process holds the threads of the tests before it."""
    code = f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); import test_pymalloc; test_pymalloc.{body}()"
    root = Path(__file__).resolve().parents[2]
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=root
    )
    assert result.returncode == 0, result.stderr[-3000:]


def _peak_with_survivors() -> list[str]:
    made = [f"{i:08d}-survivor-or-not" for i in range(PEAK)]
    kept = made[::KEEP_EVERY]
    del made
    gc.collect()
    return kept


@needs_pymalloc
def test_trim_gives_back_arenas_that_a_few_survivors_pin() -> None:
    _in_a_fresh_interpreter("_trim_gives_back_arenas_that_a_few_survivors_pin")


def _trim_gives_back_arenas_that_a_few_survivors_pin() -> None:
    rss = psutil.Process().memory_info
    kept = _peak_with_survivors()
    before = rss().rss
    trim()  # gc, the empty pools, malloc_trim: without the pools ~0 of the peak comes back
    given_back = before - rss().rss
    assert given_back > 8 << 20, f"only {given_back >> 20} MiB given back"
    assert kept[7] == f"{7 * KEEP_EVERY:08d}-survivor-or-not"


@needs_pymalloc
def test_released_pools_are_used_again_with_their_contents_intact() -> None:
    _in_a_fresh_interpreter("_released_pools_are_used_again_with_their_contents_intact")


def _released_pools_are_used_again_with_their_contents_intact() -> None:
    kept = _peak_with_survivors()
    assert release_empty_pools() > 4 << 20
    assert release_empty_pools() < 1 << 20  # done once: nothing left to give
    again = [(i, f"{i}" * 3, [i, i + 1]) for i in range(PEAK // 2)]  # lands in the released pools
    assert all(again[i] == (i, f"{i}" * 3, [i, i + 1]) for i in range(0, PEAK // 2, 97))
    assert all(k == f"{n * KEEP_EVERY:08d}-survivor-or-not" for n, k in enumerate(kept))
    del again
    gc.collect()
    assert release_empty_pools() > 0


def test_without_the_known_layout_nothing_is_touched(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pymalloc, "_libc", lambda: None)
    assert pymalloc.supported() is False
    assert release_empty_pools() == 0


@needs_pymalloc
def test_the_release_leaves_no_objects_of_its_own_behind() -> None:
    _in_a_fresh_interpreter("_the_release_leaves_no_objects_of_its_own_behind")


def _the_release_leaves_no_objects_of_its_own_behind() -> None:
    """Regression (docs/benchmarks.md 11l): the scan kept a Python tuple per pool, and the idle check held
    its own frame in a cycle that kept the caller's locals, so after a release to the OS ~16k of the scan's
    objects stayed, in the pools of the peak it was giving back, until the next collection. The release
    must leave the number of blocks in use where it found it, with no collection after it."""
    kept = _peak_with_survivors()
    release_empty_pools()  # the first call fills its one-time caches (libc's functions, ctypes' types)
    kept += _peak_with_survivors()
    gc.disable()
    try:
        before = sys.getallocatedblocks()
        assert release_empty_pools() > 4 << 20
        left = sys.getallocatedblocks() - before
    finally:
        gc.enable()
    assert left < 200, f"{left} blocks of the release's own outlived it"
    assert kept[3] == f"{3 * KEEP_EVERY:08d}-survivor-or-not"


@needs_pymalloc
def test_idle_executor_workers_allow_it_and_a_running_thread_forbids_it() -> None:
    _in_a_fresh_interpreter("_idle_executor_workers_allow_it_and_a_running_thread_forbids_it")


def _idle_executor_workers_allow_it_and_a_running_thread_forbids_it() -> None:
    """Another thread that may run could take a pool between its check and its madvise: then nothing
    is touched. Idle `ThreadPoolExecutor` workers (the proxy's `to_thread` pool) wait on a queue that
    only this thread feeds."""
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(str, range(4)))  # the workers exist and are idle
        kept = _peak_with_survivors()
        assert release_empty_pools() > 4 << 20
        stop = threading.Event()
        runner = threading.Thread(target=stop.wait)  # blocked, but on something this thread does not own
        runner.start()
        try:
            kept += _peak_with_survivors()
            assert release_empty_pools() == 0
        finally:
            stop.set()
            runner.join()


@needs_pymalloc
def test_memory_that_only_looks_like_an_empty_pool_is_left_alone() -> None:
    _in_a_fresh_interpreter("_memory_that_only_looks_like_an_empty_pool_is_left_alone")


def _memory_that_only_looks_like_an_empty_pool_is_left_alone() -> None:
    """The scan reads every private mapping at 16 KiB boundaries, so other memory (a buffer, a heap)
    can hold numbers shaped like a pool header. Before a pool is emptied of its pages it must look like
    one pymalloc emptied: a free list that starts inside it; here it does not, and its bytes survive."""
    import mmap
    import struct

    region = mmap.mmap(-1, 4 * pymalloc.POOL_SIZE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    base = ctypes_address(region)
    first = -base % pymalloc.POOL_SIZE  # the first pool boundary in the region
    size = 16
    live = struct.pack("<IxxxxQQQIIII", 1, 0, 0, 0, 777_777, 0, 48 + size, pymalloc.POOL_SIZE - size)
    fake = struct.pack("<IxxxxQQQIIII", 0, 12345, 0, 0, 777_777, 0, 48 + size, pymalloc.POOL_SIZE - size)
    region[first : first + len(live)] = live
    second = first + pymalloc.POOL_SIZE
    body = b"\xab" * (pymalloc.POOL_SIZE - len(fake))
    region[second : second + pymalloc.POOL_SIZE] = fake + body
    _peak_with_survivors()
    release_empty_pools()
    assert region[second : second + len(fake)] == fake
    assert region[second + len(fake) : second + pymalloc.POOL_SIZE] == body


def ctypes_address(region: object) -> int:
    import ctypes

    return ctypes.addressof(ctypes.c_char.from_buffer(region))  # type: ignore[arg-type]
