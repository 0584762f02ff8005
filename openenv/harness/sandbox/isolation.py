"""How `LocalSandbox` walls a process in: bubblewrap (`bwrap`, Debian's `bubblewrap`) command lines.

Each process a local sandbox runs gets, from `bwrap`:
- its own **mount namespace** whose root is a fresh tmpfs holding only read-only binds of the system
  (`/usr`, `/etc`, the `/lib*` links), of what the harnesses need (the harness cache, the Python that
  runs them), and the sandbox's own folders, the Harbor ones at their absolute paths (`/app` or the
  task's WORKDIR, `/tests`, `/solution`, `/logs/verifier`, `/logs/agent`); a fresh `/proc` and `/dev`.
  Nothing is ever created on the host's `/`;
- its own **PID namespace** (the host's processes, their `/proc/<pid>/environ` included, are not there;
  when its first process dies, the kernel kills the rest), IPC, UTS and cgroup namespaces;
- with `network="loopback"`, its own **network namespace** with only `lo`: the capture proxy is reached
  through a unix socket and `forwarder.py` inside (see `openenv.harness.forwarder`);
- an **unprivileged uid** with **no capabilities** (empty bounding set, `no_new_privs`) that cannot make
  user namespaces. Run as root, the outer `bwrap` builds the namespaces and mounts with root's reach (it
  can bind a Python under `/root`) and loads `seccomp.py`'s filter (no user namespaces, no keyrings, no
  `setns`), then `setpriv` drops to `SANDBOX_UID`; where that filter is not known (another
  architecture) or an image is the system, an inner `bwrap` adds a user namespace that cannot make
  further ones instead. Run as a normal user, one rootless `bwrap` does it all with that user's uid, in
  a user namespace of its own.
"""

from __future__ import annotations

import os
import posixpath
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "SANDBOX_UID",
    "Mount",
    "bwrap_argv",
    "bwrap_binary",
    "missing_isolation",
    "runtime_paths",
    "system_binary",
]

# The uid (and gid) sandboxed processes run as when openenv runs as root; override with
# $OPENENV_SANDBOX_UID. Not root, not the caller: files it may write are handed to it explicitly.
SANDBOX_UID = int(os.environ.get("OPENENV_SANDBOX_UID", "61000"))
# Read-only system folders every sandbox sees (symlinks, as on merged-/usr Debian, are recreated).
SYSTEM_DIRS = ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# Where the forwarder script and the proxy's unix sockets appear inside.
RUN_DIR = "/run/openenv"


@dataclass(frozen=True)
class Mount:
    """A host path shown inside the sandbox at `target`."""

    source: Path
    target: str
    writable: bool = False


def system_binary(name: str, *dirs: str) -> str | None:
    """`name` on PATH, else in the first of `dirs` that has it (a PATH without the system folders: a
    harness's or a user's); None when it is in neither. Asked before every sandboxed command: the answer
    is kept while PATH is the same and the file is still there (one `access` instead of a PATH walk)."""
    key = (name, os.environ.get("PATH"), dirs)
    found = _BINARIES.get(key)
    if found is not None and os.access(found, os.X_OK):
        return found
    found = shutil.which(name) or next(
        (path for path in (os.path.join(d, name) for d in dirs) if os.path.exists(path)), None
    )
    if found is not None:
        if len(_BINARIES) > 64:
            _BINARIES.clear()
        _BINARIES[key] = found
    return found


_BINARIES: dict[tuple[str, str | None, tuple[str, ...]], str] = {}


def bwrap_binary() -> str | None:
    """The `bwrap` executable, or None when bubblewrap is not installed."""
    return system_binary("bwrap", "/usr/bin", "/bin")


def missing_isolation() -> str | None:
    """What keeps this machine from isolating a local sandbox, as a sentence naming the missing piece
    and what to do; None when nothing is missing."""
    if bwrap_binary() is None:
        return (
            "bubblewrap (`bwrap`) is not installed: install it (Debian/Ubuntu: `apt-get install "
            "bubblewrap`, or run scripts/install_sandbox.sh), or pass --isolation none to run the "
            "harness on the host without a boundary"
        )
    if os.geteuid() == 0 and shutil.which("setpriv") is None:
        return (
            "`setpriv` (util-linux) is not installed, so the sandbox cannot drop root: install "
            "util-linux, or pass --isolation none"
        )
    if os.geteuid() != 0:
        try:
            if Path("/proc/sys/user/max_user_namespaces").read_text().strip() == "0":
                return (
                    "unprivileged user namespaces are disabled (user.max_user_namespaces = 0), so "
                    "bubblewrap cannot run without root: enable them, run as root, or pass --isolation none"
                )
        except OSError:
            pass
    return None


def _venv_home(venv: Path) -> Path | None:
    """The base Python prefix of a virtualenv (its pyvenv.cfg `home`, one level up from bin)."""
    try:
        for line in (venv / "pyvenv.cfg").read_text().splitlines():
            key, _, value = line.partition("=")
            if key.strip() == "home":
                return Path(value.strip()).resolve().parent
    except OSError:
        pass
    return None


def runtime_paths(harness_cache: Path | None, extra: tuple[Path, ...] = ()) -> list[Path]:
    """Host folders a harness needs to run, shown read-only: the harness cache, this Python (venv and
    base; the stand-in harnesses and the forwarder run on it) and the base Python of every harness venv
    in the cache (a pyenv Python may live under /root, which the sandbox's uid cannot traverse).

    Every sandbox asks (3-4 ms of reading and resolving per episode); the answer is reused while what
    it was read from is unchanged: the same arguments, the same harness venvs in the cache, each
    `pyvenv.cfg` unchanged (inode, size, mtime), and every path it named still there."""
    cfgs = _venv_configs(harness_cache)
    where = os.path.realpath(harness_cache) if harness_cache is not None else None
    key = (where, tuple(extra), tuple((cfg, _stamp(cfg)) for cfg in cfgs))
    cached = _RUNTIME_PATHS.get(key)
    if cached is not None and all(p.exists() for p in cached):
        return list(cached)
    paths = [Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve(), *(Path(p).resolve() for p in extra)]
    if harness_cache is not None and harness_cache.is_dir():
        paths.append(harness_cache.resolve())
        for cfg in cfgs:
            if (home := _venv_home(cfg.parent)) is not None:
                paths.append(home)
    kept = _outermost(p for p in paths if p.exists())
    if len(_RUNTIME_PATHS) > 64:  # a few caches per process at most; never grows without bound
        _RUNTIME_PATHS.clear()
    _RUNTIME_PATHS[key] = tuple(kept)
    return kept


_RUNTIME_PATHS: dict[object, tuple[Path, ...]] = {}


def _venv_configs(harness_cache: Path | None) -> list[Path]:
    if harness_cache is None or not harness_cache.is_dir():
        return []
    return sorted(harness_cache.glob("*/pyvenv.cfg"))


def _stamp(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


def _outermost(paths: object) -> list[Path]:
    """Distinct paths, dropping any that lies under another or under a system folder."""
    system = [Path(d) for d in SYSTEM_DIRS]
    kept: list[Path] = []
    for path in sorted(set(paths), key=lambda p: len(p.parts)):  # type: ignore[call-overload]  # paths is any iterable of Paths; typed object for callers
        if not any(path == k or k in path.parents for k in [*system, *kept]):
            kept.append(path)
    return kept


def _system_ops() -> list[str]:
    ops: list[str] = []
    for folder in SYSTEM_DIRS:
        if os.path.islink(folder):
            ops += ["--symlink", os.readlink(folder), folder]
        elif os.path.isdir(folder):
            ops += ["--ro-bind", folder, folder]
    return ops


# Top-level entries of an image root the sandbox never shows from the image: fresh ones are mounted.
IMAGE_SKIPPED = frozenset({"proc", "dev", "sys", "tmp"})


def _image_ops(root: Path, base: str) -> list[str]:
    """Each top-level entry of an unpacked image root, read-only under `base` (links recreated as links):
    the image is the system, instead of this host's `/usr` and `/etc`."""
    ops: list[str] = ["--perms", "0755", "--dir", base] if base != "/" else []
    for entry in sorted(os.scandir(root), key=lambda e: e.name):
        if entry.name in IMAGE_SKIPPED:
            continue
        target = f"{base.rstrip('/')}/{entry.name}"
        if entry.is_symlink():
            ops += ["--symlink", os.readlink(entry.path), target]
        elif entry.is_dir() or entry.is_file():
            ops += ["--ro-bind", entry.path, target]
    return ops


# Where, run as root, the outer bwrap assembles an image's view: it keeps this host's system at `/` for
# `setpriv` and the inner `bwrap`, and the inner one makes this folder the sandbox's `/`.
IMAGE_VIEW = "/run/openenv-image"


def bwrap_argv(
    argv: list[str],
    *,
    mounts: list[Mount],
    chdir: str,
    loopback: bool,
    uid: int | None,
    image_root: Path | None = None,
    seccomp_fd: int | None = None,
) -> list[str]:
    """The command line that runs `argv` walled in as described above.

    Args:
        mounts: the sandbox's own folders and the read-only runtime paths, mounted after the system
            (parents before children, so `/logs` exists before `/logs/agent` is bound on it).
        uid: drop to this uid (root callers); None runs as the caller's own (unprivileged) uid.
        image_root: an unpacked image's root filesystem, shown read-only as the system instead of the
            host's (`rootfs.RootfsCache`); mount points inside it must exist (`rootfs.ensure_mountpoint`).
            Run as root, the view is built at `IMAGE_VIEW` and the inner bwrap makes it `/`.
        seccomp_fd: with `uid` and no `image_root`, a readable fd holding `seccomp.program()` (passed to
            the child; `bwrap` reads it to its end): the outer `bwrap` loads the filter and `setpriv`
            runs `argv` with no inner `bwrap`. Ignored otherwise.
    """
    bwrap = bwrap_binary()
    if bwrap is None:
        raise RuntimeError(missing_isolation())
    outer = [
        bwrap,
        "--die-with-parent",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--hostname",
        "sandbox",
        "--unshare-cgroup-try",
    ]
    if loopback:
        outer.append("--unshare-net")
    if uid is None:
        outer += ["--unshare-user", "--disable-userns"]
    base = "" if image_root is None or uid is None else IMAGE_VIEW
    if image_root is None or uid is not None:
        outer += _system_ops()
    if image_root is not None:
        outer += _image_ops(image_root, base or "/")
    outer += ["--proc", "/proc", "--dev", "/dev"]
    if base:  # the inner bwrap reads the outer /proc; the sandbox gets its own under the view
        outer += ["--proc", f"{base}/proc", "--dev", f"{base}/dev", "--dir", "/tmp"]  # bwrap stages in /tmp
    normal = {m.target: posixpath.normpath(m.target) for m in mounts}
    ordered = sorted(mounts, key=lambda m: normal[m.target].rstrip("/").count("/"))  # parents first
    targets = {m.target for m in ordered}
    made: set[str] = set(SYSTEM_DIRS) if image_root is None else set()
    bound = tuple(f"{t}/" for t in normal.values() if t != "/")  # folders the host's files show through
    in_memory: list[str] = []
    for mount in ordered:
        # Folders bwrap would make on the way are 0700 root-owned: make them 0755 first, so the
        # sandbox's uid can walk down to its mounts (`/logs` for `/logs/verifier`). Strings, not
        # PurePosixPaths: this runs before every sandboxed command (0.3 ms of pathlib a command).
        parent = ""
        for part in normal[mount.target].split("/")[1:-1]:
            parent = f"{parent}/{part}"
            if parent in made or parent in targets:
                continue
            if image_root is not None and os.path.lexists(image_root / parent.lstrip("/")):
                continue
            # One inside a bound folder would be made in the host's folder itself: the sandbox's /tmp
            # holds the mount points of its own folders by their host paths (/tmp/openenv-*/workspace,
            # ...), four new folders on the host for every command. A tmpfs there holds them in memory
            # instead; the host gets one empty folder per sandbox (issue 48: a folder made on this
            # machine's busy ext4 without a journal cost 0.2-0.3 ms of CPU).
            on_host = parent.startswith(bound) and not parent.startswith(tuple(in_memory))
            outer += ["--perms", "0755", "--tmpfs" if on_host else "--dir", f"{base}{parent}"]
            made.add(parent)
            if on_host:
                in_memory.append(f"{parent}/")
        outer += ["--bind" if mount.writable else "--ro-bind", str(mount.source), f"{base}{mount.target}"]
    filtered = uid is not None and image_root is None and seccomp_fd is not None
    if filtered:
        outer += ["--seccomp", str(seccomp_fd)]
    outer += ["--chdir", chdir if not base else "/", "--"]
    if uid is None:
        return [*outer, *argv]
    drop = [
        system_binary("setpriv") or "setpriv",
        f"--reuid={uid}",
        f"--regid={uid}",
        "--clear-groups",
        "--inh-caps=-all",
        "--bounding-set=-all",
        "--no-new-privs",
        "--",
    ]
    if filtered:  # the filter stands in for the inner bwrap's user namespace (seccomp.py)
        return [*outer, *drop, *argv]
    inner = [
        bwrap,
        "--die-with-parent",
        "--unshare-user",
        "--disable-userns",
        "--uid",
        str(uid),
        "--gid",
        str(uid),
        "--dev-bind",
        base or "/",
        "/",
        "--chdir",
        chdir,
        "--",
    ]
    return [*outer, *drop, *inner, *argv]
