"""One cgroup per local sandbox: every process it starts joins it, limits apply to all of them together,
and `kill()` ends every member at once, daemons that left the process tree or the marker included.

Works on what the machine has:
- **membership and kill** through cgroup v2 (`cgroup.kill`, `cgroup.events`), also where v2 is only
  mounted beside v1 (`/sys/fs/cgroup/unified` on hybrid hosts) without any controller;
- **limits** (`pids.max`, `memory.max`) through v2 controllers where the parent group delegates them,
  else through the v1 `pids` and `memory` hierarchies (`pids.max`, `memory.limit_in_bytes`).
Without v2, the kill falls back to SIGKILL of every member of the v1 `pids` group until it is empty.

A process joins by writing `0` to the groups' `cgroup.procs` files (opened here, written by the child
between fork and exec), so it is a member before its first instruction and nothing it forks escapes.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["CgroupError", "SandboxCgroup", "member_pids", "sweep_stale"]

PREFIX = "openenv-"


class CgroupError(RuntimeError):
    """No usable cgroup for what was asked (the message names the missing piece)."""


@dataclass(frozen=True)
class _Hierarchy:
    mount: Path
    version: int
    controllers: frozenset[str]
    own: str  # this process's group in it, relative to the mount


def _hierarchies() -> list[_Hierarchy]:
    """The cgroup hierarchies mounted here, with this process's group in each (/proc/self/cgroup)."""
    own: dict[str, str] = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        hid, ctrls, path = line.split(":", 2)
        own["" if hid == "0" else ctrls] = path
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        fstype, _, opts = (right.split(" ") + ["", "", ""])[:3]
        fields = left.split(" ")
        root, mount = fields[3], Path(fields[4])
        if fstype == "cgroup2" and "" in own:
            group = _under_mount_root(own[""], root)
            ctrl_file = mount / group.lstrip("/") / "cgroup.controllers"
            ctrls = frozenset(ctrl_file.read_text().split()) if ctrl_file.exists() else frozenset()
            found.append(_Hierarchy(mount, 2, ctrls, group))
        elif fstype == "cgroup":
            names = frozenset(
                o for o in opts.split(",") if o in {"pids", "memory", "freezer", "cpu", "cpuacct"}
            )
            key = next((k for k in own if k and frozenset(k.split(",")) & names), None)
            if names and key is not None:
                found.append(_Hierarchy(mount, 1, names, _under_mount_root(own[key], root)))
    return found


def _under_mount_root(group: str, root: str) -> str:
    """`group` (from /proc/self/cgroup) as a path under a mount of the hierarchy's `root` subtree.

    Inside a container without a cgroup namespace, /proc/self/cgroup says `/docker/<id>` while the mount
    at /sys/fs/cgroup/<ctrl> already *is* `/docker/<id>` (mountinfo's root field): joining the two named a
    folder that does not exist, and every sandbox in such a container was refused.
    """
    if root in ("", "/") or not (group == root or group.startswith(root.rstrip("/") + "/")):
        return group
    return "/" + group[len(root) :].lstrip("/")


def _write(path: Path, value: str) -> None:
    path.write_text(value)


@dataclass
class SandboxCgroup:
    """The groups of one sandbox (`openenv-<sandbox id>` in each hierarchy used)."""

    name: str
    dirs: list[Path] = field(default_factory=list)
    v2: Path | None = None
    pids_dir: Path | None = None
    memory_dir: Path | None = None
    described: str = ""
    _fds: list[int] = field(default_factory=list)

    @classmethod
    def create(cls, sandbox_id: str, *, pids: int | None, memory_mb: int | None) -> SandboxCgroup:
        """Make the groups and set the limits.

        Raises:
            CgroupError: no writable cgroup hierarchy, or a limit was asked for that no hierarchy offers.
        """
        group = cls(PREFIX + sandbox_id)
        try:
            group._make(pids=pids, memory_mb=memory_mb)
        except BaseException:
            group.remove()
            raise
        return group

    def _mkdir(self, parent: Path) -> Path:
        path = parent / self.name
        try:
            path.mkdir()
        except OSError as exc:
            raise CgroupError(
                f"cannot create cgroup {path}: {exc.strerror} (run as root, or on a "
                "machine that delegates a cgroup to this user)"
            ) from exc
        self.dirs.append(path)
        return path

    def _make(self, *, pids: int | None, memory_mb: int | None) -> None:
        hierarchies = _hierarchies()
        v2 = next((h for h in hierarchies if h.version == 2), None)
        parts = []
        if v2 is not None:
            parent = v2.mount / v2.own.lstrip("/")
            wanted = {c for c, limit in (("pids", pids), ("memory", memory_mb)) if limit is not None}
            usable = wanted & v2.controllers
            if usable:  # delegate them to our child group (fails under the no-internal-process rule)
                with contextlib.suppress(OSError):
                    _write(parent / "cgroup.subtree_control", " ".join(f"+{c}" for c in sorted(usable)))
                enabled = set((parent / "cgroup.subtree_control").read_text().split())
                usable &= enabled
            self.v2 = self._mkdir(parent)
            if "pids" in usable:
                self.pids_dir = self.v2
                _write(self.v2 / "pids.max", str(pids))
            if "memory" in usable:
                self.memory_dir = self.v2
                _write(self.v2 / "memory.max", str(memory_mb << 20))
                with contextlib.suppress(OSError):
                    _write(self.v2 / "memory.swap.max", "0")
            parts.append("v2 (" + ", ".join(["kill", *sorted(usable)]) + ")")
        v1 = {c: h for h in hierarchies if h.version == 1 for c in h.controllers}
        if pids is not None and self.pids_dir is None and "pids" in v1:
            self.pids_dir = self._mkdir(v1["pids"].mount / v1["pids"].own.lstrip("/"))
            _write(self.pids_dir / "pids.max", str(pids))
            parts.append("v1 pids")
        elif self.v2 is None and "pids" in v1:  # membership for the kill fallback
            self.pids_dir = self._mkdir(v1["pids"].mount / v1["pids"].own.lstrip("/"))
        if memory_mb is not None and self.memory_dir is None and "memory" in v1:
            self.memory_dir = self._mkdir(v1["memory"].mount / v1["memory"].own.lstrip("/"))
            _write(self.memory_dir / "memory.limit_in_bytes", str(memory_mb << 20))
            with contextlib.suppress(OSError):  # no swap accounting on this kernel: nothing to cap
                _write(self.memory_dir / "memory.memsw.limit_in_bytes", str(memory_mb << 20))
            parts.append("v1 memory")
        if self.v2 is None and self.pids_dir is None:
            raise CgroupError(
                "no cgroup v2 hierarchy and no v1 `pids` hierarchy is mounted under /sys/fs/cgroup"
            )
        missing = [
            what
            for what, limit, where in (("pids", pids, self.pids_dir), ("memory", memory_mb, self.memory_dir))
            if limit is not None and where is None
        ]
        if missing:
            raise CgroupError(
                f"no cgroup controller for the {' and '.join(missing)} limit (neither v2 "
                "delegation nor a v1 hierarchy); pass Limits(... = None) to run without it"
            )
        self.described = " + ".join(parts)

    def procs_files(self) -> list[Path]:
        """`cgroup.procs` of each group: a process writes `0` to each to join (`local_process.confine`)."""
        return [d / "cgroup.procs" for d in self.dirs]

    def join_fds(self) -> list[int]:
        """Open `cgroup.procs` of each group for writing; a child writes `0` to each to join."""
        if not self._fds:
            self._fds = [os.open(d / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC) for d in self.dirs]
        return self._fds

    def pids(self) -> list[int]:
        """Every live member (host pids)."""
        found: set[int] = set()
        for d in (self.v2, self.pids_dir):
            if d is not None:
                with contextlib.suppress(OSError):
                    found.update(int(p) for p in (d / "cgroup.procs").read_text().split())
        return sorted(found)

    def usage(self) -> dict[str, int]:
        """What the limits saw so far: peak process count, forks refused at the pids limit, peak memory
        in bytes and processes killed at the memory limit (where the kernel reports each)."""
        found: dict[str, int] = {}

        def read(path: Path) -> dict[str, int]:
            with contextlib.suppress(OSError, ValueError):
                text = path.read_text().split()
                if len(text) == 1:
                    return {"": int(text[0])}
                return {k: int(v) for k, v in zip(text[::2], text[1::2], strict=False)}
            return {}

        if self.pids_dir is not None:
            if (peak := read(self.pids_dir / "pids.peak").get("")) is not None:
                found["pids_peak"] = peak
            found["pids_refused"] = read(self.pids_dir / "pids.events").get("max", 0)
        if self.memory_dir is not None:
            v2 = self.memory_dir == self.v2
            peak_file = "memory.peak" if v2 else "memory.max_usage_in_bytes"
            if (peak := read(self.memory_dir / peak_file).get("")) is not None:
                found["memory_peak_bytes"] = peak
            events = read(self.memory_dir / ("memory.events" if v2 else "memory.oom_control"))
            found["oom_kills"] = events.get("oom_kill", 0)
        return found

    def kill(self, timeout_s: float = 10) -> bool:
        """SIGKILL every member and wait until none is left; True when the group is empty."""
        deadline = time.monotonic() + timeout_s
        if self.v2 is not None and (self.v2 / "cgroup.kill").exists():
            with contextlib.suppress(OSError):
                _write(self.v2 / "cgroup.kill", "1")
        while pids := self.pids():
            if self.v2 is None or not (self.v2 / "cgroup.kill").exists():
                for pid in pids:  # v1 only: a fork between the read and the kill is caught next round
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)
        return True

    def remove(self) -> None:
        """Kill what is left and remove the groups (children before parents)."""
        for fd in self._fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._fds = []
        if self.dirs:
            self.kill(timeout_s=5)
        for d in reversed(self.dirs):
            for _ in range(50):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:  # members still exiting
                    time.sleep(0.02)
        self.dirs = []


def sweep_stale(*, every_s: float = 0.0) -> list[str]:
    """Remove the groups of sandboxes whose owning process died without closing them (killing what is
    still inside); returns their paths. A sandbox id starts with its owner's pid.

    With `every_s`, nothing is done (`[]`) when this process swept less than that many seconds ago:
    every local sandbox asks before making its groups, and one sweep reads every hierarchy (~0.35 ms).
    Groups go stale only when another process dies, so a sweep a minute finds them as well."""
    now = time.monotonic()
    if every_s and now - _SWEPT_AT[0] < every_s:
        return []
    _SWEPT_AT[0] = now
    stale: dict[str, SandboxCgroup] = {}
    for h in _hierarchies():
        parent = h.mount / h.own.lstrip("/")
        for path in parent.glob(PREFIX + "*"):
            owner = path.name.removeprefix(PREFIX).split("-", 1)[0]
            if not owner.isdigit() or Path(f"/proc/{owner}").exists():
                continue
            group = stale.setdefault(path.name, SandboxCgroup(path.name))
            group.dirs.append(path)
            if h.version == 2:
                group.v2 = path
            elif "pids" in h.controllers:
                group.pids_dir = path
    removed = []
    for group in stale.values():
        paths = [str(d) for d in group.dirs]
        group.remove()  # one kill over every hierarchy first, then the rmdirs
        removed += paths
    return removed


_SWEPT_AT = [float("-inf")]  # when this process last swept (monotonic)


def member_pids(owner_pid: int) -> list[int]:
    """Live members of every sandbox group made by process `owner_pid` (for leak checks)."""
    found: set[int] = set()
    for h in _hierarchies():
        if h.version == 2 or "pids" in h.controllers:
            for procs in (h.mount / h.own.lstrip("/")).glob(f"{PREFIX}{owner_pid}-*/cgroup.procs"):
                with contextlib.suppress(OSError):
                    found.update(int(p) for p in procs.read_text().split())
    return sorted(found)
