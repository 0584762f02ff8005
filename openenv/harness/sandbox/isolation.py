"""How `LocalSandbox` walls a process in: bubblewrap (`bwrap`, Debian's `bubblewrap`) command lines.

Every process a local sandbox runs is started by `bwrap` in its own mount namespace, whose root is a
fresh tmpfs: the host folders the sandbox needs are bind-mounted into it, and the Harbor folders
(`/app` or the task's WORKDIR, `/tests`, `/solution`, `/logs/verifier`, `/logs/agent`) are the
sandbox's own folders, mounted at those absolute paths. Nothing is ever created on the host's `/`.

With `network="loopback"` the process also gets a network namespace with only `lo`; the capture proxy
is reached through a unix socket and `forwarder.py` inside (see `openenv.harness.forwarder`).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

__all__ = ["Mount", "bwrap_binary", "bwrap_argv", "host_view", "missing_isolation"]

# Top-level host entries never bound into a sandbox as they are: pseudo file systems get fresh ones.
_FRESH = {"proc", "dev", "sys"}


@dataclass(frozen=True)
class Mount:
    """A host path shown inside the sandbox at `target`."""

    source: Path
    target: str
    writable: bool = False


def bwrap_binary() -> str | None:
    """The `bwrap` executable, or None when bubblewrap is not installed."""
    return shutil.which("bwrap") or next((p for p in ("/usr/bin/bwrap", "/bin/bwrap") if os.path.exists(p)), None)


def missing_isolation() -> str | None:
    """What keeps this machine from isolating a local sandbox, as a sentence naming the missing piece
    and what to do; None when nothing is missing."""
    if bwrap_binary() is None:
        return ("bubblewrap (`bwrap`) is not installed: install it (Debian/Ubuntu: `apt-get install "
                "bubblewrap`, or run scripts/install.sh), or pass --isolation none to run the harness "
                "on the host without a boundary")
    return None


def host_view(skip: set[str]) -> list[tuple[str, str, str]]:
    """bwrap operations that show the host's top-level folders as they are (read-write), except the
    pseudo file systems and the top-level names in `skip` (the sandbox's own Harbor folders)."""
    ops = []
    for entry in sorted(os.listdir("/")):
        if entry in _FRESH or entry in skip:
            continue
        path = f"/{entry}"
        if os.path.islink(path):
            ops.append(("--symlink", os.readlink(path), path))
        elif os.path.isdir(path):
            ops.append(("--bind", path, path))
    return ops


def bwrap_argv(
    argv: list[str],
    *,
    mounts: list[Mount],
    chdir: str,
    loopback: bool,
    base_ops: list[tuple[str, str, str]],
) -> list[str]:
    """The `bwrap` command line that runs `argv` over `base_ops` (the system view) plus `mounts`.

    Mount points are created inside the sandbox's own tmpfs root, never on the host: parents are
    mounted before children (sorted by depth), so `/logs` exists before `/logs/agent` is bound on it.
    """
    bwrap = bwrap_binary()
    if bwrap is None:
        raise RuntimeError(missing_isolation())
    cmd = [bwrap, "--die-with-parent", "--dev-bind", "/dev", "/dev", "--proc", "/proc", "--ro-bind", "/sys", "/sys"]
    for op in base_ops:
        cmd.extend(op)
    for mount in sorted(mounts, key=lambda m: len(PurePosixPath(m.target).parts)):
        cmd.extend(["--bind" if mount.writable else "--ro-bind", str(mount.source), mount.target])
    if loopback:
        cmd.append("--unshare-net")
    cmd.extend(["--chdir", chdir, "--", *argv])
    return cmd
