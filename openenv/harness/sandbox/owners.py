"""Who made a sandbox object: an owner label naming the host, pid and start time of the process.

Its own module because both the sweeper and the pulled-image ledger (`pulled.py`, which the sweeper
collects) need it: in either of them it made an import cycle.
"""

from __future__ import annotations

import os
import socket

import psutil

__all__ = ["is_orphan", "owner_label"]


def owner_label(pid: int | None = None) -> str:
    """`host/pid/start-time` for this process: a pid alone is reused, the start time makes it unique."""
    proc = psutil.Process(pid or os.getpid())
    return f"{socket.gethostname()}/{proc.pid}/{proc.create_time():.2f}"


def is_orphan(owner: str | None) -> bool:
    """True when `owner` names a process on this host that is no longer running.

    Objects owned by another host (a shared engine) are never orphans here: we cannot see their owner.
    """
    if not owner:
        return True
    host, _, rest = owner.partition("/")
    pid, _, started = rest.partition("/")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        return f"{psutil.Process(int(pid)).create_time():.2f}" != started
    except psutil.NoSuchProcess:
        return True
