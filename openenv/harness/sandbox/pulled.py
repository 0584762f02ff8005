"""The images openenv pulled: a ledger of who uses them, and their garbage collection.

An engine cannot label an image it pulls (labels live in the image's own config), so each image a pull
brought in gets a ledger entry instead: `<openenv cache>/pulled-images/<hash>.json` with the reference,
the owners using it (`owners.owner_label()`: host/pid/start time, so a reused pid is not mistaken for
the user) and when it was last used. A run claims an image before it looks for it, and again on each use.

`collect()` removes an image whose users are all gone (the run ended, was killed, or its driver died)
oldest-used first, until the images left without a user fit `$OPENENV_PULLED_KEEP_GB` (default 20 GB;
0 removes each as soon as no run uses it): a task set's images stay a cache for the next run, bounded.
It runs when a process that pulled exits, with the orphan sweep when a process's first Docker sandbox
starts, and on `openenv sandbox sweep` (`--all` drops the budget). An image in use by a container, or
given another tag by someone, keeps its layers: only our reference is removed.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import hashlib
import json
import os
import threading
import time
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from openenv.harness.sandbox.owners import is_orphan, owner_label

if TYPE_CHECKING:
    import docker

__all__ = ["KEEP_ENV", "claim", "collect", "entries", "forget", "ledger_dir", "pending", "record"]

KEEP_ENV = "OPENENV_PULLED_KEEP_GB"
_exit_hook = threading.Lock()
_hooked = False


def ledger_dir() -> Path:
    """`$OPENENV_PULLED_DIR`, else `<openenv cache>/pulled-images`."""
    from openenv.resources import cache_dir

    folder = Path(os.environ.get("OPENENV_PULLED_DIR") or cache_dir() / "pulled-images")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _path(reference: str) -> Path:
    return ledger_dir() / f"{hashlib.sha256(reference.encode()).hexdigest()[:32]}.json"


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[dict[str, Any]]:
    """The entry at `path` (empty when new), locked for this block and written back after it."""
    with open(path.with_suffix(".lock"), "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            entry = json.loads(path.read_text())
        except (OSError, ValueError):
            entry = {}
        yield entry
        if entry:
            temporary = path.with_suffix(f".{os.getpid()}.tmp")
            temporary.write_text(json.dumps(entry))
            temporary.replace(path)
        else:
            path.unlink(missing_ok=True)


def claim(reference: str) -> None:
    """Mark `reference` as used by this process now, if the ledger knows it (a no-op otherwise)."""
    path = _path(reference)
    if not path.exists():
        return
    with _locked(path) as entry:
        if entry:
            owners = set(entry.get("owners", [])) | {owner_label()}
            entry.update(owners=sorted(owners), last_used=time.time())
    _collect_at_exit()  # the last user to leave cleanly collects


def pending(reference: str) -> None:
    """Enter `reference` before this process pulls it: `pending` until `record` completes the entry.

    Entered first so that a process finding the image present mid-pull (another's pull) counts as its
    user, and no collector removes it under that process; `forget` drops the entry if the pull fails."""
    _enter(reference, state="pending")


def record(client: docker.DockerClient, reference: str) -> None:
    """Complete `reference`'s entry once this process pulled it: the image's id and size, `pulled`."""
    try:
        image = client.images.get(reference)
        image_id, size = image.id, int(image.attrs.get("Size") or 0)
    except Exception:
        image_id, size = "", 0
    _enter(reference, state="pulled", image_id=image_id, size=size)


def _enter(reference: str, **fields: object) -> None:
    """Write `fields` into `reference`'s entry with this process among its owners, then collect at exit."""
    with _locked(_path(reference)) as entry:
        owners = set(entry.get("owners", [])) | {owner_label()}
        entry.update(
            reference=reference,
            **fields,
            owners=sorted(owners),
            pulled_at=entry.get("pulled_at", time.time()),
            last_used=time.time(),
        )
    _collect_at_exit()


def forget(reference: str) -> None:
    """Drop `reference`'s entry: its pull failed, so there is no image of ours to collect."""
    with _locked(_path(reference)) as entry:
        entry.clear()


def entries() -> list[dict[str, Any]]:
    """Every ledger entry (reference, state, image_id, size, owners, pulled_at, last_used)."""
    found = []
    for path in sorted(ledger_dir().glob("*.json")):
        try:
            found.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue
    return found


def _keep_bytes(everything: bool) -> int:
    if everything:
        return 0
    try:
        return int(float(os.environ.get(KEEP_ENV, "20")) * 1e9)
    except ValueError:
        return int(20e9)


def collect(
    client: docker.DockerClient, *, everything: bool = False, leaving: Collection[str] = ()
) -> list[str]:
    """Remove pulled images no live process uses, oldest-used first, down to the keep budget.

    Args:
        everything: no budget, and live users too: every image openenv pulled goes (`sweep --all`).
        leaving: owner labels that count as gone (this process collecting at its exit, a Ray worker
            shutting down).

    Returns:
        The references removed. One a container still uses is skipped (and stays in the ledger).
    """
    import docker.errors

    def live(entry: dict[str, Any]) -> list[str]:
        return [o for o in entry.get("owners", []) if o not in leaving and not is_orphan(o)]

    idle: list[tuple[float, int, str]] = []
    kept = 0
    for listed in entries():
        reference = str(listed.get("reference", ""))
        # Read again under the lock: a claim made since `entries()` read the file must not be written over.
        with _locked(_path(reference)) as entry:
            if not entry:
                continue
            users = entry["owners"] = live(entry)
            last_used, size = float(entry.get("last_used", 0)), int(entry.get("size", 0))
        if users and not everything:
            continue
        idle.append((last_used, size, reference))
        kept += size
    budget = _keep_bytes(everything)
    removed = []
    for _, size, reference in sorted(idle):
        if budget and kept <= budget:
            break
        # Removed under the entry's lock, its users checked again: a run claims before it looks for the
        # image, so it either is seen here and the image kept, or claims after and finds it gone.
        with _locked(_path(reference)) as entry:
            if not entry or (live(entry) and not everything):
                kept -= size  # gone, or in use again: no longer an idle image the budget counts
                continue
            try:
                client.images.remove(reference, noprune=False)
            except docker.errors.ImageNotFound:
                pass
            except docker.errors.APIError:
                continue  # a container uses it: kept, and tried again next time
            entry.clear()
        removed.append(reference)
        kept -= size
    return removed


def _collect_at_exit() -> None:
    global _hooked
    with _exit_hook:
        if _hooked:
            return
        _hooked = True
    atexit.register(_collect_quietly)


def _collect_quietly() -> None:
    try:
        import docker

        client = docker.from_env()
        try:
            collect(client, leaving=(owner_label(),))
        finally:
            client.close()
    except Exception:
        pass
