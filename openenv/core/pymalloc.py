"""Give CPython's empty small-object pools back to the OS while their arena stays.

CPython puts every object of up to 512 bytes in pymalloc: 1 MiB arenas cut into 16 KiB pools. An arena
goes back to the OS only when every pool in it is empty, and a new object goes into the fullest arena
that has room, so a few objects that outlive a peak (a pooled connection, a cached string) keep dozens
of arenas mapped whose other pools are all empty. Measured in docs/benchmarks.md section 11d: after 300
sessions closed, the proxy kept 32 more arenas than at its start, holding ~550 KB of live blocks and
~21 MB of empty pools. `malloc_trim` cannot reach them (arenas are their own mmaps), and moving the
live objects is not possible.

`release_empty_pools` finds the pools by reading their headers, and for each empty pool in a partly
used arena marks it to be set up afresh on its next use and `madvise(MADV_DONTNEED)`s all of it but
the page holding its header (3/4 of the pool). The arena stays mapped; a page read again comes back
zeroed, which a freshly set-up pool never reads. It runs only where the layout is the one checked
here (CPython 3.11 on Linux, pymalloc without debug hooks), only while every other Python thread is
an idle executor worker (so no thread can allocate between a pool's check and its madvise; in a
process where others run, such as a trainer hosting the proxy, it does nothing), and touches only
pools of arenas whose headers agree (one index, one 1 MiB span, a pool in use), and only when the
blocks they count are no more than `sys.getallocatedblocks()`. Elsewhere it is a no-op returning 0.
"""

from __future__ import annotations

import ctypes
import dis
import functools
import linecache
import os
import struct
import sys
import threading
from array import array
from collections.abc import Callable, Iterator

__all__ = ["release_empty_pools", "supported"]

POOL_SIZE = 16384  # 3.11: POOL_BITS = 14
_HEADER = struct.Struct("<IxxxxQQQIIII")  # count, freeblock, nextpool, prevpool, arenaindex, szidx,
_HEADER_BYTES = _HEADER.size  # nextoffset, maxnextoffset: struct pool_header, 48 bytes
_SZIDX_OFFSET = 36
_DUMMY_SIZE_IDX = 0xFFFF  # what obmalloc gives a pool it carves anew: set it up on first use
_PAGE = 4096
_MADV_DONTNEED = 4
_ARENA_SIZE = 1 << 20
_WORKER_FILE = os.path.join("concurrent", "futures", "thread.py")


def supported() -> bool:
    """Whether this interpreter's allocator is the one this module knows how to read."""
    return _libc() is not None


@functools.cache
def _libc() -> tuple[Callable[[int, int, int], int], Callable[[int, object, int, int], int]] | None:
    """(madvise, pread) called through PyDLL, which keeps the GIL for the call."""
    if not sys.platform.startswith("linux") or sys.implementation.name != "cpython":
        return None
    if sys.version_info[:2] != (3, 11) or sys.flags.dev_mode:
        return None
    if os.environ.get("PYTHONMALLOC", "") not in ("", "pymalloc"):
        return None
    if os.sysconf("SC_PAGE_SIZE") != _PAGE:
        return None
    try:
        libc = ctypes.PyDLL(None)
        madvise, pread = libc.madvise, libc.pread
    except (OSError, AttributeError):
        return None
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    madvise.restype = ctypes.c_int
    pread.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_long]
    pread.restype = ctypes.c_ssize_t
    return madvise, pread


def _others_idle() -> bool:
    """Whether every other Python thread is an idle `ThreadPoolExecutor` worker, blocked in its
    `work_queue.get` (fed only by whoever submits work: in the proxy, the event loop, which is this
    thread). Any other thread might allocate at any moment: then the pools are left alone. Switching
    the GIL cannot be prevented from Python, so this is what makes the check-then-madvise safe."""
    frames = sys._current_frames()
    # This thread's own frame goes first: held in `frames`, it made a cycle (its locals hold `frames`)
    # that kept it, and through its `f_back` the caller's locals (the whole scan), alive until the next
    # collection, in the very pools the scan was to give back (docs/benchmarks.md 11l).
    del frames[threading.get_ident()]
    for frame in frames.values():
        code = frame.f_code
        if code.co_name != "_worker" or not code.co_filename.endswith(_WORKER_FILE):
            return False
        line = linecache.getline(code.co_filename, frame.f_lineno).strip()
        if not line.startswith("work_item = work_queue.get(block=True)"):
            return False
        opname = next((i.opname for i in dis.get_instructions(code) if i.offset == frame.f_lasti), "")
        if opname != "CALL":  # in the call, not about to make it or just back from it
            return False
    return True


def _regions() -> Iterator[tuple[int, int]]:
    """Anonymous private read-write mappings: where pymalloc's arenas are."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            parts = line.split()
            if len(parts) == 5 and parts[1] == "rw-p":
                lo, hi = (int(x, 16) for x in parts[0].split("-"))
                yield lo, hi


def _pool(header: bytes, address: int) -> tuple[int, int, int] | None:
    """(count, arena index, size index) when `header`, read at `address`, is a pool header in use,
    else None. An empty pool must also look like one pymalloc emptied: its free list starts inside it
    (its last block freed), and it links to nothing or to another pool (an arena's free pools), so that
    other memory that happens to hold such numbers at a 16 KiB boundary is not taken for a pool."""
    count, freeblock, nextpool, _, arena, szidx, nextoffset, maxnext = _HEADER.unpack(header)
    if szidx >= 32:
        return None
    size = (szidx + 1) * 16
    if maxnext != POOL_SIZE - size or not _HEADER_BYTES <= nextoffset <= POOL_SIZE:
        return None
    if count > (POOL_SIZE - _HEADER_BYTES) // size or arena > 1 << 24:
        return None
    if count == 0:
        if not address + _HEADER_BYTES <= freeblock < address + nextoffset:
            return None
        if (freeblock - address - _HEADER_BYTES) % size or (nextpool and nextpool % POOL_SIZE):
            return None
    return count, arena, szidx


def _scan() -> tuple[int, array[int], array[int], array[int]]:
    """(blocks in use, then each pool header found: its address, block count and arena index), read
    through /proc/self/mem so that memory another thread unmaps meanwhile is an error to skip, not a
    crash. The pools go in arrays, not Python tuples: thousands of small objects made now would land in
    the very pools being counted as empty, and keep them."""
    addresses, counts, arenas = array("Q"), array("I"), array("I")
    used = 0
    fd = os.open("/proc/self/mem", os.O_RDONLY)
    try:
        for lo, hi in _regions():
            address = (lo + POOL_SIZE - 1) & ~(POOL_SIZE - 1)
            while address + POOL_SIZE <= hi:
                try:
                    header = os.pread(fd, _HEADER_BYTES, address)
                except OSError:
                    header = b""
                found = _pool(header, address) if len(header) == _HEADER_BYTES else None
                if found is not None:
                    count, arena, _ = found
                    used += count
                    addresses.append(address)
                    counts.append(count)
                    arenas.append(arena)
                address += POOL_SIZE
    finally:
        os.close(fd)
    return used, addresses, counts, arenas


def release_empty_pools() -> int:
    """Hand the pages of empty pools in partly used arenas back to the OS; the bytes handed back (0
    where unsupported, or when the scan does not match the allocator's own count)."""
    libc = _libc()
    if libc is None:
        return 0
    madvise, pread = libc
    used, addresses, counts, arenas = _scan()
    # getallocatedblocks also counts the objects over 512 bytes that pymalloc hands to malloc: the pools
    # found may hold fewer blocks, never more (more would mean a false header: then touch nothing).
    if used > sys.getallocatedblocks():
        return 0
    # arena index -> the lowest and the highest address of a pool in use there (ints, not tuples: a
    # freed tuple stays allocated in the tuple free list)
    lowest: dict[int, int] = {}
    highest: dict[int, int] = {}
    for i in range(len(addresses)):
        if counts[i]:
            address, arena = addresses[i], arenas[i]
            lowest[arena] = min(lowest.get(arena, address), address)
            highest[arena] = max(highest.get(arena, address), address)
    empty = array("Q")
    for i in range(len(addresses)):
        arena = arenas[i]
        if counts[i] or arena not in lowest:
            continue
        lo, hi, address = lowest[arena], highest[arena], addresses[i]
        if hi - lo >= _ARENA_SIZE:  # not one arena: two headers claim the same index
            continue
        if hi - _ARENA_SIZE < address < lo + _ARENA_SIZE:
            empty.append(address)
    if not empty or not _others_idle():
        return 0
    # Every other Python thread is blocked on a queue only this thread feeds (`_others_idle`), so none
    # can allocate from a pool between its check here and its madvise.
    given = 0
    buf = ctypes.create_string_buffer(_HEADER_BYTES)
    fd = os.open("/proc/self/mem", os.O_RDONLY)
    try:
        for address in empty:
            # pread of /proc/self/mem, not a pointer read: an address unmapped since the scan is EIO
            if pread(fd, buf, _HEADER_BYTES, address) != _HEADER_BYTES:
                continue
            found = _pool(buf.raw, address)
            if found is None or found[0] != 0:
                continue
            ctypes.c_uint32.from_address(address + _SZIDX_OFFSET).value = _DUMMY_SIZE_IDX
            if madvise(address + _PAGE, POOL_SIZE - _PAGE, _MADV_DONTNEED) == 0:
                given += POOL_SIZE - _PAGE
    finally:
        os.close(fd)
    return given
