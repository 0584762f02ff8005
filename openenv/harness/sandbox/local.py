"""LocalSandbox: an episode on this machine, walled in by bubblewrap and a cgroup (see `isolation.py`).

Every process joins the sandbox's cgroup and gets a marker variable (`OPENENV_SANDBOX=<id>`), so
descendants that leave the process group (Cline's hub daemon does `setsid`) or drop the marker are
still found and killed on close.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path, PurePosixPath
from typing import Literal, Self

from openenv.errors import BadRequest, EnvError
from openenv.harness import forwarder
from openenv.harness.sandbox import isolation as isolation_mod
from openenv.harness.sandbox import seccomp
from openenv.harness.sandbox.base import (
    HARBOR_DIRS,
    CommandResult,
    Limits,
    container_relpath,
    run_to_end,
)
from openenv.harness.sandbox.cgroup import CgroupError, SandboxCgroup, sweep_stale
from openenv.harness.sandbox.files import HostFolders, write_tree
from openenv.harness.sandbox.identity import (
    SANDBOX_USER,
    check_free_uid,
    login_shell,
    private_root,
    write_identity,
)
from openenv.harness.sandbox.local_process import (
    MARKER,
    LocalProcess,
    alive,
    confine,
    kill_tree,
    marked_processes,
    owner_prefix,
    sandboxed_processes,
)
from openenv.harness.sandbox.netns import LoopbackNamespace
from openenv.harness.sandbox.reaper import remove_later
from openenv.harness.sandbox.rootfs import ImageRoot, ensure_mountpoint

__all__ = [
    "DEFAULT_ENV_ALLOW",
    "MARKER",
    "NO_CGROUP_ENV",
    "LocalProcess",
    "LocalSandbox",
    "kill_tree",
    "passed_through",
    "sandboxed_processes",
]

# Variables passed through from our own environment; everything else is dropped.
DEFAULT_ENV_ALLOW = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM", "SSL_CERT_FILE", "SSL_CERT_DIR")
# `none`: no per-sandbox cgroup. For a container whose /sys/fs/cgroup is read-only (Docker's default): the
# container bounds the harness's resources, and PID namespaces still end its processes. Explicit and warned.
NO_CGROUP_ENV = "OPENENV_SANDBOX_CGROUP"
# Groups left by dead processes are swept at most this often, not before every sandbox (cgroup.sweep_stale)
SWEEP_EVERY_S = 60.0
IMAGE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"  # an image without ENV PATH
Network = Literal["host", "loopback"]
Isolation = Literal["bwrap", "none"]
_log = logging.getLogger("openenv.sandbox")


def passed_through(allow: tuple[str, ...] = DEFAULT_ENV_ALLOW) -> dict[str, str]:
    """The variables of this process's environment that a sandbox passes on: those named in `allow`."""
    return {name: os.environ[name] for name in allow if name in os.environ}


class LocalSandbox(HostFolders):
    """One episode on this machine, walled in: temp folders, env allow-list, rlimits, a cgroup, timeouts.

    Every process runs under bubblewrap (see `isolation.py`): an unprivileged uid without capabilities
    in its own user, mount, PID, IPC and (with `network="loopback"`) network namespaces, over a
    read-only view of the system where the sandbox's own folders appear at the Harbor paths: the
    workdir (`/app`), `/tests`, `/solution`, `/logs/verifier` and `/logs/agent`. HOME, TMPDIR and the
    workspace are also shown at their host paths, so config files written on the host name paths that
    exist inside. All processes join one cgroup (pids and memory limits; `cgroup.kill` on
    `end_agent()` and `close()`), so nothing they fork survives the sandbox.

    Args:
        limits: rlimits for every process, and the sandbox-wide pids and memory limits.
        env_allow: names passed through from this process's environment.
        network: `"loopback"` (default): a network namespace with only `lo`, where ports in
            `forward_ports` reach this host's 127.0.0.1 through a unix socket. `"host"`: the host's
            network, an explicit opt-out that is logged as a warning for every sandbox.
        forward_ports: 127.0.0.1 ports (the capture proxy) made reachable inside the namespace.
        workdir: the container path of the working tree (a Harbor task's WORKDIR; default `/app`).
        isolation: `"bwrap"` (default; refused with the missing piece named when this machine cannot
            do it) or `"none"`: processes run on the host as this user with no boundary and no Harbor
            paths (an explicit opt-out, logged as a warning for every sandbox).
        read_only: more host folders to show read-only at their own paths (a harness installed
            elsewhere than the harness cache).
        image: run in this unpacked image (`rootfs.RootfsCache.get`) instead of this host's system:
            its root filesystem read-only at `/`, the sandbox's folders and the harness cache bound on
            it, its `Env` (PATH first) as the base environment, its `python3` running the proxy's
            forwarder. Needs `isolation="bwrap"`.

    Raises:
        EnvError: isolation (or loopback networking, or a cgroup for the limits) is not available here;
            the message names what is missing and how to opt out.
    """

    def __init__(
        self,
        *,
        limits: Limits | None = None,
        env_allow: tuple[str, ...] = DEFAULT_ENV_ALLOW,
        network: Network = "loopback",
        forward_ports: tuple[int, ...] = (),
        workdir: str = "/app",
        isolation: Isolation = "bwrap",
        read_only: tuple[Path, ...] = (),
        image: ImageRoot | None = None,
    ) -> None:
        if image is not None and isolation != "bwrap":
            raise BadRequest(
                "a task image runs in the local sandbox only with isolation='bwrap' (its root "
                "filesystem is the sandbox's; without bubblewrap there is no way to show it)"
            )
        self._image = image
        if isolation == "bwrap" and (missing := isolation_mod.missing_isolation()) is not None:
            raise EnvError(f"the local sandbox cannot isolate the harness: {missing}")
        if network == "loopback" and isolation == "none" and (missing := _unshare_missing()) is not None:
            raise EnvError(
                f"network='loopback' without isolation needs {missing}; install bubblewrap and use "
                "isolation='bwrap', or pass network='host'"
            )
        self._workdir = _check_workdir(workdir)
        # The owner's pid first: a test (or an operator) can tell whose sandbox a process belongs to.
        self.id = owner_prefix() + uuid.uuid4().hex[:12]
        self._limits = limits or Limits()
        self._env_allow = env_allow
        self._network = network
        self._isolation = isolation
        self._uid = isolation_mod.SANDBOX_UID if isolation == "bwrap" and os.geteuid() == 0 else None
        if self._uid is not None:
            check_free_uid(self._uid, what="the local sandbox's", variable="OPENENV_SANDBOX_UID")
        self._processes: list[LocalProcess] = []
        self._swept = 0  # processes started before the last search by marker (end_agent)
        self._agent_ended = False
        self._made_mountpoints: set[PurePosixPath] = set()
        self._bridges: list[forwarder.UnixToTcpBridge] = []
        self._netns: LoopbackNamespace | None = None
        self._cgroup: SandboxCgroup | None = None
        self._closed = True  # until every part exists: close() then has nothing to undo
        self._readonly: dict[str, bool] = {"/tests": True, "/solution": True}
        self.root = Path(tempfile.mkdtemp(prefix="openenv-"))
        try:
            self._prepare(forward_ports, read_only)
        except BaseException:
            self._closed = False
            self.close()
            raise
        self._closed = False
        for warning in self._warnings():
            _log.warning("sandbox %s: %s", self.id, warning)

    def _prepare(self, forward_ports: tuple[int, ...], read_only: tuple[Path, ...]) -> None:
        # 0700: other local users must not read the session token, the solution, the workspace or the
        # logs. The sandbox's uid never walks this folder on the host: bubblewrap (root) binds its
        # subfolders, and inside they hang off bwrap's own directories.
        private_root(self.root)
        for sub in ("workspace", "home", "tmp", "logs", "etc"):  # sock/: only for forwarders, below
            (self.root / sub).mkdir()
        for container in HARBOR_DIRS:
            self.host_path(container).mkdir(parents=True)
        for path in (self.root / "tmp", self.host_path("/logs/verifier"), self.host_path("/logs/agent")):
            self.hand_over(path)
        self.hand_over(self.workspace)
        self.hand_over(self.home)
        # The same folder the installer used, default included (it was only the env var, so the README's
        # main job, run without it, showed the harness no CLI: 'pi: not found').
        from openenv.harness.install import cache_root

        if self._image is None:
            self._runtime = isolation_mod.runtime_paths(cache_root(), extra=read_only)
        else:  # as in Docker: only the harness installs come from this host, the rest is the image's
            self._runtime = [p.resolve() for p in (cache_root(), *read_only) if p.exists()]
        if self._isolation == "bwrap":
            system = Path("/") if self._image is None else self._image.rootfs
            uid = os.getuid() if self._uid is None else self._uid
            write_identity(self.root / "etc", uid, self.home, shell=login_shell(system))
        self._cgroup = self._make_cgroup()
        if self._network == "loopback" and forward_ports and os.geteuid() == 0:
            # The proxy's ports listen inside a namespace this process made: no forwarder process in the
            # sandbox, and no wait for one before each command (see netns.py). Where that cannot be
            # done (a container without CAP_SYS_ADMIN), the forwarders below.
            try:
                self._netns = LoopbackNamespace(forward_ports)
                return
            except OSError as exc:
                _log.debug("sandbox %s: no namespace of its own for the proxy's ports (%s)", self.id, exc)
        if self._network == "loopback":
            if forward_ports:
                (self.root / "sock").mkdir()
            for port in forward_ports:
                sock = self.root / "sock" / f"p{port}.sock"
                self._bridges.append(forwarder.UnixToTcpBridge(sock, "127.0.0.1", port).start())
                # Only the sandbox's uid connects to it (the folder is mounted read-only); never 0666.
                if self._uid is not None:
                    os.chown(sock, self._uid, self._uid)
                sock.chmod(0o600)

    def _make_cgroup(self) -> SandboxCgroup | None:
        pids, memory = self._limits.pids, self._limits.memory_mb
        if os.environ.get(NO_CGROUP_ENV) == "none":
            return None  # explicit: the container this runs in is the resource boundary (warned below)
        try:
            sweep_stale(every_s=SWEEP_EVERY_S)
            return SandboxCgroup.create(self.id, pids=pids, memory_mb=memory)
        except (CgroupError, OSError) as exc:
            if self._isolation == "none":
                return None
            raise EnvError(
                f"the local sandbox cannot contain the harness: {exc}; or pass --isolation none "
                f"(or, inside a container that bounds it, set {NO_CGROUP_ENV}=none)"
            ) from exc

    def _warnings(self) -> list[str]:
        warnings = []
        if self._isolation == "none":
            warnings.append(
                "isolation='none': the harness runs on the host as this user, with no boundary "
                "(it can read this machine's files and processes and write anywhere you can)"
            )
        if self._network == "host":
            warnings.append("network='host': the harness can reach every network this machine can")
        if self._isolation == "bwrap" and self._cgroup is None:
            warnings.append(
                f"{NO_CGROUP_ENV}=none: no cgroup of its own (no pids/memory limits, no cgroup.kill); "
                "processes are ended through their PID namespace and marker only"
            )
        return warnings

    @property
    def workdir(self) -> str:
        return self._workdir

    @property
    def cgroup(self) -> str:
        """How this sandbox's processes are grouped and limited (for reports), or `none`."""
        return self._cgroup.described if self._cgroup is not None else "none"

    @property
    def network_namespace(self) -> str | None:
        """The path of the namespace where the agent's commands reach the proxy's ports (root only: it
        names a descriptor of this process), or None: forwarders, another network, or the agent's side
        has ended."""
        return self._netns.path if self._netns is not None else None

    def usage(self) -> dict[str, int]:
        """What the sandbox-wide limits saw (peak processes, forks refused, peak memory, OOM kills)."""
        return self._cgroup.usage() if self._cgroup is not None else {}

    def _roots(self) -> dict[str, Path]:
        """Container folder -> host folder, for the workdir and the Harbor folders."""
        harbor = self.root / "harbor"
        return {self._workdir: self.workspace, **{c: harbor / c.lstrip("/") for c in HARBOR_DIRS}}

    def host_path(self, container_path: str) -> Path:
        roots = self._roots()
        root, below = container_relpath(container_path, tuple(roots))
        return roots[root] / below if below.parts else roots[root]

    def stage(self, container_path: str, files: dict[str, bytes | str], *, readonly: bool = True) -> None:
        base = self.host_path(container_path)
        if container_path in self._roots():
            self._readonly[container_path] = readonly
        write_tree(base, files)
        if not readonly:
            self.hand_over(base)

    def end_agent(self) -> None:
        self._agent_ended = True
        for process in self._processes:  # each one's own tree; nothing to do for one that has exited
            process.kill(sweep=False)
        if self._cgroup is not None:
            self._cgroup.kill()
        # One search by marker, for daemons that left both their tree and the cgroup; none when nothing
        # was started since the last one (verify, then close: every process was already gone). Under
        # bubblewrap there is nothing to search for: each command's processes live in its PID namespace,
        # which the kernel empties when the namespace's first process dies (the command exiting, or the
        # kill above), and no process can leave it. The search reads the environment of every process on
        # the host: twice an episode, O(processes on the host) each time.
        if self._isolation != "bwrap" and len(self._processes) > self._swept:
            kill_tree(None, self.id)
            self._swept = len(self._processes)
        # The proxy was the agent's. The tests import the agent's code, so a grading run reaching it
        # could add turns to the episode's trajectory: like Docker's grading container, every run from
        # here on gets no bridge and no forwarder (which also spares each one a Python start).
        bridges, self._bridges = self._bridges, []
        for bridge in bridges:
            bridge.close()
        netns, self._netns = self._netns, None
        if netns is not None:
            netns.close()

    def environment(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        """The allow-listed environment, with the sandbox's HOME, TMPDIR and marker, plus `extra`."""
        env = passed_through(self._env_allow)
        if self._image is not None:  # the image's own variables (its PATH above all), as Docker sets them
            env.pop("PATH", None)
            env.update({k: v for k, v in self._image.env.items() if k not in ("HOME", "USER", "TMPDIR")})
            env.setdefault("PATH", IMAGE_PATH)
        env.update(HOME=str(self.home), TMPDIR=str(self.root / "tmp"), USER=SANDBOX_USER, **{MARKER: self.id})
        env.update(extra or {})
        return env

    def hand_over(self, path: Path) -> None:
        """Give the sandbox's uid the folder `path` and all below it (not following symlinks, which
        the sandbox may have planted), so it can write there; nothing to do without a uid drop."""
        if self._uid is None or not path.is_dir() or path.is_symlink():
            return
        uid = self._uid
        os.chown(path, uid, uid, follow_symlinks=False)
        for _, dirs, files, dir_fd in os.fwalk(path, follow_symlinks=False):
            for name in dirs + files:
                with contextlib.suppress(FileNotFoundError):
                    if os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_uid != uid:
                        os.chown(name, uid, uid, dir_fd=dir_fd, follow_symlinks=False)

    def _forwarders(self, isolated: bool) -> str:
        """Shell lines that start one forwarder per proxy port inside the namespace and wait for each.

        Each waits on a FIFO that the forwarder writes once its listener is bound (or fails): `read` blocks
        in the shell at no cost. Polling for a file spawned a `sleep` every 10 ms until then, a cost that
        grew with the machine's load (forwarders take seconds to start with 32 episodes on 2 cores)."""
        script = f"{isolation_mod.RUN_DIR}/forwarder.py" if isolated else forwarder.__file__
        # "$0" is the interpreter: this Python on the host's system, the image's python3 in an image
        lines = []
        for bridge in self._bridges:
            port = bridge.socket_path.stem.removeprefix("p")
            sock = (
                f"{isolation_mod.RUN_DIR}/sock/{bridge.socket_path.name}" if isolated else bridge.socket_path
            )
            ready = self.root / "tmp" / f".openenv-forwarder-{port}-{uuid.uuid4().hex[:8]}"
            os.mkfifo(ready, 0o600)
            if self._uid is not None:
                os.chown(ready, self._uid, self._uid)
            # The shell holds the FIFO open itself (fd 3, read-write: no open blocks), so a forwarder
            # that never ran (an image without python3) says `failed` through it too, instead of the
            # shell waiting for a writer until the harness's timeout.
            lines.append(
                f"exec 3<> {ready}; "
                f'{{ "$0" -I -S {script} --listen 127.0.0.1:{port} --to-unix {sock} --ready {ready} '
                f"|| echo failed >&3; }} & "
                f"read -r openenv_ready <&3; exec 3<&-; rm -f {ready}; "
                f'[ "$openenv_ready" = ready ] || {{ echo "openenv: the forwarder to port {port} did not start" >&2; exit 111; }}'
            )
        return "; ".join(lines)

    def _mounts(self) -> list[isolation_mod.Mount]:
        mount = isolation_mod.Mount
        mounts = [
            mount(host, container, writable=not self._readonly.get(container, False))
            for container, host in self._roots().items()
        ]
        # Host paths too: harness configs written on the host (HOME) name them.
        mounts += [
            mount(self.root / sub, str(self.root / sub), writable=True) for sub in ("workspace", "home")
        ]
        for sub in (
            "private",
            "grader",
        ):  # the pre-Harbor verifier's folders and the grader's HOME, by host path
            if (self.root / sub).is_dir():
                mounts.append(mount(self.root / sub, str(self.root / sub), writable=True))
        mounts += [
            mount(self.root / "tmp", "/tmp", writable=True),
            mount(self.root / "tmp", str(self.root / "tmp"), writable=True),
            mount(self.root / "etc" / "passwd", "/etc/passwd"),
            mount(self.root / "etc" / "group", "/etc/group"),
        ]
        if self._bridges:  # the forwarder and the proxy's sockets; none once end_agent closed the bridges
            mounts += [
                mount(Path(forwarder.__file__), f"{isolation_mod.RUN_DIR}/forwarder.py"),
                mount(self.root / "sock", f"{isolation_mod.RUN_DIR}/sock"),
            ]
        mounts += [mount(path, str(path)) for path in self._runtime]
        if self._image is not None:
            self._make_mountpoints(mounts)
            return mounts
        venv = Path(sys.executable).parent.parent  # this Python by the name it was started with, too
        if venv.resolve() != venv and venv.resolve() in self._runtime:
            mounts.append(mount(venv.resolve(), str(venv)))
        return mounts

    def _make_mountpoints(self, mounts: list[isolation_mod.Mount]) -> None:
        """Mount points that fall inside the read-only image (the harness cache under /var, the workdir
        when the image lacks it) are made in the unpacked root once: empty folders and files."""
        assert self._image is not None
        targets = [PurePosixPath(m.target) for m in mounts]
        for mount, target in zip(mounts, targets, strict=True):
            covered = any(other != target and other in target.parents for other in targets)
            top = target.parts[1] if len(target.parts) > 1 else ""
            if covered or top in isolation_mod.IMAGE_SKIPPED or not os.path.lexists(self._image.rootfs / top):
                continue  # on another mount or on bwrap's own tmpfs root
            if target in self._made_mountpoints:
                continue
            ensure_mountpoint(self._image.rootfs, str(target), is_file=mount.source.is_file())
            self._made_mountpoints.add(target)

    def _wrap(self, argv: list[str], cwd: str, seccomp_fd: int | None = None) -> list[str]:
        loopback = self._network == "loopback"
        isolated = self._isolation == "bwrap"
        # Joined before bubblewrap starts, which then makes no network namespace of its own.
        enter = self._netns.enter_argv() if loopback and self._netns is not None else []
        if loopback and self._bridges:
            python = sys.executable if self._image is None else "python3"
            argv = ["/bin/sh", "-c", f'{self._forwarders(isolated)}; exec "$@"', python, *argv]
        if isolated:
            return enter + isolation_mod.bwrap_argv(
                argv,
                mounts=self._mounts(),
                chdir=cwd,
                loopback=loopback and not enter,
                uid=self._uid,
                image_root=None if self._image is None else self._image.rootfs,
                seccomp_fd=seccomp_fd,
            )
        if not loopback or enter:
            return enter + argv
        script = f'{_ip_binary()} link set lo up; exec "$@"'
        return [shutil.which("unshare") or "unshare", "--net", "--", "/bin/sh", "-c", script, "sh", *argv]

    def _cwd(self, cwd: str | Path | None) -> str:
        """The working directory as the process sees it (a container path when isolated)."""
        if cwd is None:
            return self._workdir if self._isolation == "bwrap" else str(self.workspace)
        if self._isolation == "none" and not Path(cwd).is_relative_to(self.root):
            try:
                return str(self.host_path(str(cwd)))
            except BadRequest:
                return str(cwd)
        return str(cwd)

    def _popen(self, argv: list[str], env: dict[str, str], cwd: str, log: Path) -> subprocess.Popen[bytes]:
        environment = self.environment(env)
        if self._isolation == "none" and not _executable(argv[0], cwd, environment.get("PATH")):
            # Popen would have said so, but it now execs `confine`'s shell, which would only exit 127
            raise FileNotFoundError(f"{argv[0]}: no such executable (PATH {environment.get('PATH')})")
        procs = self._cgroup.procs_files() if self._cgroup is not None else []
        # Root over the host's system: the outer bwrap loads the seccomp filter in place of an inner
        # bwrap's user namespace (seccomp.py); None where the filter is unknown (the inner bwrap then).
        filtered = self._isolation == "bwrap" and self._uid is not None and self._image is None
        seccomp_fd = seccomp.program_fd() if filtered else None
        try:
            with log.open("ab") as out:
                return subprocess.Popen(
                    [*confine(self._limits, procs), *self._wrap(argv, cwd, seccomp_fd)],
                    cwd=cwd if self._isolation == "none" else self.root,
                    env=environment,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    pass_fds=() if seccomp_fd is None else (seccomp_fd,),
                )
        finally:
            if seccomp_fd is not None:
                os.close(seccomp_fd)

    def start(
        self, argv: list[str], *, env: dict[str, str], timeout_s: float, cwd: str | Path | None = None
    ) -> LocalProcess:
        if self._closed:
            raise EnvError("sandbox is closed")
        # Harness configs were just written there by this (root) process. Once the agent has ended, HOME
        # holds what it left, already the sandbox's: walking it again before the tests cost ~1 ms for
        # codex's ~100 files (issue 48). What grading writes goes to its own folders, handed over there.
        if not self._agent_ended:
            self.hand_over(self.home)
        log = self.root / "logs" / f"{len(self._processes)}-{Path(argv[0]).name}.log"
        try:
            popen = self._popen(argv, env, self._cwd(cwd), log)
        except OSError as exc:
            raise EnvError(f"could not start {argv[0]!r}: {exc}") from exc
        process = LocalProcess(popen, log, self.id, timeout_s, wrapped=self._isolation == "bwrap")
        self._processes.append(process)
        return process

    def run(
        self,
        argv: list[str],
        *,
        env: dict[str, str] | None = None,
        timeout_s: float = 120,
        cwd: str | Path | None = None,
    ) -> CommandResult:
        return run_to_end(self.start(argv, env=env or {}, timeout_s=timeout_s, cwd=cwd), argv, timeout_s)

    def leftover_pids(self) -> list[int]:
        found = {p.pid for p in marked_processes(lambda value: value == self.id)}
        if self._cgroup is not None:
            found.update(pid for pid in self._cgroup.pids() if alive(pid))
        return sorted(found)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.end_agent()  # its processes, and the bridges to the proxy
        if self._cgroup is not None:
            self._cgroup.remove()
        # Nothing of the sandbox's runs any more: the folder leaves its path now, its files go on a
        # background thread (11-13 ms of every codex episode's wall; `reaper.py`).
        remove_later(self.root)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _check_workdir(workdir: str) -> str:
    """The workdir must be an absolute path of its own, not `/` nor inside a system folder."""
    path = PurePosixPath(workdir)
    if not path.is_absolute() or ".." in path.parts or len(path.parts) < 2:
        raise BadRequest(f"workdir must be an absolute folder below /, got {workdir!r}")
    if path.parts[1] in {
        "usr",
        "etc",
        "bin",
        "sbin",
        "lib",
        "lib64",
        "proc",
        "dev",
        "sys",
        "tests",
        "solution",
        "logs",
        "run",
        "tmp",
    }:
        raise BadRequest(f"workdir {workdir!r} lies in a system or Harbor folder; pick one such as /app")
    return str(path)


def _executable(name: str, cwd: str, path: str | None) -> bool:
    """Whether `name` would exec: a path (relative to `cwd`), or a name found on `path`."""
    if "/" in name:
        return os.access(os.path.join(cwd, name), os.X_OK)
    return shutil.which(name, path=path) is not None


def _unshare_missing() -> str | None:
    if os.geteuid() != 0:
        return "root"
    if not shutil.which("unshare"):
        return "`unshare` (util-linux)"
    return None if _ip_binary() else "`ip` (iproute2)"


def _ip_binary() -> str | None:
    return isolation_mod.system_binary("ip", "/usr/sbin", "/sbin")
