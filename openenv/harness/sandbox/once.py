"""One build or pull per image, whoever asks: a single flight across threads and processes on one host.

A GRPO group, an eval or the Ray workers of one node often start together on a task whose image is not
there yet. Without this, each episode pulls or builds the same image at once: N times the work, and an
episode that finds its neighbour's half-built image fails. `once(key, work)` runs `work` for one caller
and makes every concurrent caller of the same key wait for it and share its outcome:

- threads of one process meet in an in-process table (one `_Flight` per key, waited on with an Event);
- processes meet on a file lock (`fcntl.flock`, `<lock dir>/<hash of key>.lock`). The kernel drops the
  lock of a process that dies, so a killed builder never blocks the others for good.

A failure fails each caller that was already waiting, once, with the holder's reason (threads get the
holder's exception itself; processes a `OnceFailed` carrying its message, read from a small state file
next to the lock). A caller that arrives after the failure runs `work` again: a failed build is retried
on the next request, never in a loop. Success is not cached here: `work` itself must find an existing
result cheaply (an image already in the engine), which is what the late arrivals then see.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar, cast

from openenv.errors import EnvError

__all__ = ["OnceFailed", "lock_dir", "once"]

T = TypeVar("T")


class OnceFailed(EnvError):
    """Raised in a process that waited on another process's flight for the same key, which failed."""


def lock_dir() -> Path:
    """Where the cross-process locks live: `$OPENENV_LOCK_DIR`, else `<openenv cache>/locks`."""
    from openenv.resources import cache_dir

    folder = Path(os.environ.get("OPENENV_LOCK_DIR") or cache_dir() / "locks")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@dataclass
class _Flight:
    done: threading.Event = field(default_factory=threading.Event)
    result: object = None
    error: BaseException | None = None


_flights: dict[str, _Flight] = {}
_table = threading.Lock()


def once(
    key: str,
    work: Callable[[], T],
    *,
    on_wait: Callable[[str], None] | None = None,
    folder: Path | None = None,
) -> T:
    """Run `work()` for `key` once among every concurrent caller on this host; return its result.

    Args:
        key: what is being made, e.g. `"docker-pull:127.0.0.1:5000/x/y:1"`; equal keys share a flight.
        work: makes the thing; it should return early when the thing already exists.
        on_wait: told (with a one-line reason) when this caller waits on another thread or process.
        folder: the lock folder (default `lock_dir()`).

    Raises:
        Whatever `work` raised, in the caller that ran it and in the threads that waited on it;
        OnceFailed in a process that waited on another process's failed flight.
    """
    with _table:
        flight = _flights.get(key)
        leader = flight is None
        if leader:
            flight = _flights[key] = _Flight()
    assert flight is not None
    if not leader:
        if on_wait is not None:
            on_wait(f"waiting for another episode's {key}")
        flight.done.wait()
        if flight.error is not None:
            raise flight.error
        return cast(T, flight.result)  # set when the flight succeeded; a failed one raised above
    try:
        result = _across_processes(key, work, on_wait, folder or lock_dir())
        flight.result = result
        return result
    except BaseException as exc:
        flight.error = exc
        raise
    finally:
        with _table:
            _flights.pop(key, None)
        flight.done.set()


def _across_processes(
    key: str, work: Callable[[], T], on_wait: Callable[[str], None] | None, folder: Path
) -> T:
    """Hold the key's file lock while `work` runs; a process that had to wait first reads the last outcome."""
    stem = folder / hashlib.sha256(key.encode()).hexdigest()[:32]
    state = stem.with_suffix(".json")
    with open(stem.with_suffix(".lock"), "a+") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            seen = _generation(_read(state))
            if on_wait is not None:
                on_wait(f"waiting for another process's {key}")
            fcntl.flock(lock, fcntl.LOCK_EX)
            last = _read(state)
            if _generation(last) != seen and last.get("ok") is False:
                raise OnceFailed(str(last.get("error") or f"{key} failed in another process")) from None
        generation = _generation(_read(state)) + 1
        try:
            result = work()
        except BaseException as exc:
            _write(state, {"key": key, "generation": generation, "ok": False, "error": _reason(exc)})
            raise
        _write(state, {"key": key, "generation": generation, "ok": True})
        return result


def _reason(exc: BaseException) -> str:
    message = getattr(exc, "message", None)
    return str(message if isinstance(message, str) else exc) or type(exc).__name__


def _generation(state: dict[str, object]) -> int:
    value = state.get("generation", 0)
    return value if isinstance(value, int) else 0


def _read(state: Path) -> dict[str, object]:
    try:
        data = json.loads(state.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write(state: Path, data: dict[str, object]) -> None:
    temporary = state.with_suffix(f".{os.getpid()}.tmp")
    temporary.write_text(json.dumps(data))
    temporary.replace(state)
