"""LocalSandbox: an episode on this machine, in a temp folder, its own process group and optional netns.

Every process gets a marker variable (`OPENENV_SANDBOX=<id>`), so descendants that leave the process
group (Cline's hub daemon does `setsid`) are still found and killed on close.
"""

from __future__ import annotations

import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import uuid
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Literal, Self

import psutil

from openenv.errors import BadRequest, EnvError
from openenv.harness import forwarder
from openenv.harness.sandbox import isolation as isolation_mod
from openenv.harness.sandbox.base import HARBOR_DIRS, CommandResult, Limits, ProcessStatus, container_relpath
from openenv.paths import safe_join

__all__ = ["DEFAULT_ENV_ALLOW", "MARKER", "LocalProcess", "LocalSandbox", "kill_tree", "sandboxed_processes"]

# Variables passed through from our own environment; everything else is dropped.
DEFAULT_ENV_ALLOW = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM", "SSL_CERT_FILE", "SSL_CERT_DIR")
MARKER = "OPENENV_SANDBOX"
Network = Literal["host", "loopback"]
Isolation = Literal["bwrap", "none"]


def _preexec(limits: Limits) -> Callable[[], None]:
    pairs = [
        (resource.RLIMIT_CPU, limits.cpu_seconds),
        (resource.RLIMIT_FSIZE, None if limits.file_size_mb is None else limits.file_size_mb << 20),
        (resource.RLIMIT_NOFILE, limits.open_files),
        (resource.RLIMIT_CORE, None if limits.core_dumps else 0),
        (resource.RLIMIT_AS, None if limits.address_space_mb is None else limits.address_space_mb << 20),
    ]

    def apply() -> None:
        for which, value in pairs:
            if value is not None:
                resource.setrlimit(which, (value, value))

    return apply


def _owner_prefix(pid: int | None = None) -> str:
    """How the id of every sandbox made by process `pid` (default: this one) starts: `<pid>-`."""
    return f"{os.getpid() if pid is None else pid}-"


def sandboxed_processes(owner_pid: int | None = None) -> list[psutil.Process]:
    """Live processes started by any `LocalSandbox` of process `owner_pid` (default: this one).

    Found by their marker, so daemons that left the process group count too, and sandboxes of other
    processes on the same machine (other test runs) never do.
    """
    prefix = _owner_prefix(owner_pid)
    return _marked(lambda value: value.startswith(prefix))


def _marked(match: Callable[[str], bool]) -> list[psutil.Process]:
    """Live (not zombie) processes whose marker value `match` accepts."""
    found = []
    for proc in psutil.process_iter():
        try:
            if match(proc.environ().get(MARKER, "")) and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def kill_tree(root: int | None, sandbox_id: str, grace_s: float = 1.0) -> None:
    """Kill `root`, its descendants and every process carrying the sandbox's marker."""
    procs: dict[int, psutil.Process] = {p.pid: p for p in _marked(lambda value: value == sandbox_id)}
    if root is not None:
        try:
            parent = psutil.Process(root)
            procs[root] = parent
            procs.update({c.pid: c for c in parent.children(recursive=True)})
            os.killpg(root, signal.SIGTERM)
        except (psutil.NoSuchProcess, ProcessLookupError, PermissionError):
            pass
    for proc in procs.values():
        try:
            proc.terminate()
        except psutil.NoSuchProcess:
            pass
    _, alive = psutil.wait_procs(list(procs.values()), timeout=grace_s)
    for proc in alive:
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(alive, timeout=grace_s)


class LocalProcess:
    """A harness process with a deadline; its stdout and stderr go to one log file."""

    def __init__(
        self, popen: subprocess.Popen[bytes], log: Path, sandbox_id: str, timeout_s: float, *, wrapped: bool = False
    ) -> None:
        self._popen = popen
        # bwrap exits 128+N when its command dies of signal N; reported as -N, as Popen does.
        self._wrapped = wrapped
        self._log = log
        self._sandbox_id = sandbox_id
        self._ended_by: ProcessStatus | None = None
        self._lock = threading.Lock()
        self._watchdog = threading.Timer(timeout_s, self._end, args=("timeout",))
        self._watchdog.daemon = True
        self._watchdog.start()

    @property
    def pid(self) -> int:
        return self._popen.pid

    def exit_code(self) -> int | None:
        code = self._popen.poll()
        if self._wrapped and code is not None and 128 < code <= 128 + 64:
            return 128 - code
        return code

    def status(self) -> ProcessStatus:
        code = self.exit_code()
        if code is None:
            return "running"
        if self._ended_by is not None:
            return self._ended_by
        if code < 0:
            return "crashed"
        return "exited" if code == 0 else "failed"

    def wait(self, timeout: float | None = None) -> ProcessStatus:
        try:
            self._popen.wait(timeout)
        except subprocess.TimeoutExpired:
            pass
        return self.status()

    def output_tail(self, chars: int = 2000) -> str:
        try:
            with self._log.open("rb") as fh:
                fh.seek(max(0, self._log.stat().st_size - chars))
                return fh.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    def _end(self, reason: ProcessStatus) -> None:
        with self._lock:
            if self._popen.poll() is None and self._ended_by is None:
                self._ended_by = reason
            kill_tree(self._popen.pid, self._sandbox_id)
            self._popen.wait(5)

    def kill(self) -> None:
        self._watchdog.cancel()
        self._end("killed")


class LocalSandbox:
    """One episode on this machine: temp folders, env allow-list, rlimits, timeouts, Harbor paths.

    Every process runs under bubblewrap in a private mount namespace where the sandbox's own folders
    appear at the Harbor paths: the workdir (`/app`), `/tests`, `/solution`, `/logs/verifier` and
    `/logs/agent` (see `isolation.py`). HOME, TMPDIR and the workspace are also shown at their host
    paths, so config files written on the host name paths that exist inside.

    Args:
        limits: rlimits applied to every process started here.
        env_allow: names passed through from this process's environment.
        network: `"loopback"` runs processes in a fresh network namespace with only `lo`; ports in
            `forward_ports` then reach this host's 127.0.0.1 through a unix socket.
        forward_ports: 127.0.0.1 ports (the capture proxy) made reachable inside the namespace.
        workdir: the container path of the working tree (a Harbor task's WORKDIR; default `/app`).
        isolation: `"bwrap"` (the default) or `"none"`, which runs processes directly on the host, with
            no Harbor paths and no boundary (explicit opt-in only).
    """

    def __init__(
        self,
        *,
        limits: Limits | None = None,
        env_allow: tuple[str, ...] = DEFAULT_ENV_ALLOW,
        network: Network = "host",
        forward_ports: tuple[int, ...] = (),
        workdir: str = "/app",
        isolation: Isolation = "bwrap",
    ) -> None:
        if isolation == "bwrap" and (missing := isolation_mod.missing_isolation()) is not None:
            raise EnvError(f"the local sandbox cannot isolate the harness: {missing}")
        self._workdir = _check_workdir(workdir)
        # The owner's pid first: a test (or an operator) can tell whose sandbox a process belongs to.
        self.id = _owner_prefix() + uuid.uuid4().hex[:12]
        self.root = Path(tempfile.mkdtemp(prefix="openenv-"))
        self._limits = limits or Limits()
        self._env_allow = env_allow
        self._network = network
        self._isolation = isolation
        self._processes: list[LocalProcess] = []
        self._bridges: list[forwarder.UnixToTcpBridge] = []
        self._readonly: dict[str, bool] = {"/tests": True, "/solution": True}
        for sub in ("workspace", "home", "tmp", "logs", "sock"):
            (self.root / sub).mkdir()
        for container in HARBOR_DIRS:
            self.host_path(container).mkdir(parents=True)
        if network == "loopback":
            self._check_netns_support()
            self._bridges = [
                forwarder.UnixToTcpBridge(self.root / "sock" / f"p{port}.sock", "127.0.0.1", port).start()
                for port in forward_ports
            ]
        self._closed = False

    @property
    def workspace(self) -> Path:
        return self.root / "workspace"

    @property
    def workdir(self) -> str:
        return self._workdir

    @property
    def home(self) -> Path:
        return self.root / "home"

    def private_dir(self, name: str) -> Path:
        path = self.root / "private" / name
        path.mkdir(parents=True, exist_ok=True)
        return path

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
        base.mkdir(parents=True, exist_ok=True)
        if container_path in self._roots():
            self._readonly[container_path] = readonly
        for relative, content in files.items():
            path = safe_join(base, relative)
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(content)

    def fresh_dir(self, container_path: str) -> Path:
        path = self.host_path(container_path)
        shutil.rmtree(path, ignore_errors=True)
        if path.is_symlink() or path.exists():
            path.unlink()
        path.mkdir(parents=True)
        return path

    def end_agent(self) -> None:
        for process in self._processes:
            process.kill()
        kill_tree(None, self.id)

    def _check_netns_support(self) -> None:
        if self._isolation == "none" and (os.geteuid() != 0 or not shutil.which("unshare") or not _ip_binary()):
            raise EnvError("network='loopback' without isolation needs root, `unshare` and `ip` (iproute2); "
                           "install bubblewrap instead, or pass network='host'")

    def write_files(self, files: dict[str, str], *, under: Path | None = None) -> None:
        base = under or self.workspace
        for relative, text in files.items():
            path = safe_join(base, relative)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)

    def read_file(self, relative: str) -> str:
        return safe_join(self.workspace, relative).read_text()

    def environment(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        """The allow-listed environment, with the sandbox's HOME, TMPDIR and marker, plus `extra`."""
        env = {name: os.environ[name] for name in self._env_allow if name in os.environ}
        env.update(HOME=str(self.home), TMPDIR=str(self.root / "tmp"), USER="openenv", **{MARKER: self.id})
        env.update(extra or {})
        return env

    def _forwarders(self) -> str:
        """Shell lines that start one forwarder per proxy port inside the namespace and wait for each."""
        waits = []
        for bridge in self._bridges:
            port = bridge.socket_path.stem.removeprefix("p")
            ready = self.root / "sock" / f"p{port}.ready"
            waits.append(
                f'"$0" {forwarder.__file__} --listen 127.0.0.1:{port} --to-unix {bridge.socket_path}'
                f" --ready {ready} & while [ ! -e {ready} ]; do sleep 0.02; done"
            )
        return "; ".join(waits)

    def _mounts(self) -> list[isolation_mod.Mount]:
        mounts = [isolation_mod.Mount(host, container, writable=not self._readonly.get(container, False))
                  for container, host in self._roots().items()]
        # Host paths too: harness configs written on the host (HOME) name them.
        mounts.append(isolation_mod.Mount(self.root, str(self.root), writable=True))
        return mounts

    def _wrap(self, argv: list[str], cwd: str) -> list[str]:
        loopback = self._network == "loopback"
        if loopback and self._bridges:
            script = "; ".join([self._forwarders(), 'exec "$@"'])
            argv = ["/bin/sh", "-c", script, sys.executable, *argv]
        if self._isolation == "none":
            if not loopback:
                return argv
            script = f'{_ip_binary()} link set lo up; exec "$@"'
            return [shutil.which("unshare") or "unshare", "--net", "--", "/bin/sh", "-c", script, "sh", *argv]
        skip = {PurePosixPath(c).parts[1] for c in self._roots()}
        return isolation_mod.bwrap_argv(argv, mounts=self._mounts(), chdir=cwd, loopback=loopback,
                                        base_ops=isolation_mod.host_view(skip))

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
        with log.open("ab") as out:
            return subprocess.Popen(
                self._wrap(argv, cwd),
                cwd=cwd if self._isolation == "none" else self.root,
                env=self.environment(env),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                # The hook only calls setrlimit (async-signal-safe), so forking beside threads is fine.
                preexec_fn=_preexec(self._limits),  # noqa: PLW1509
            )

    def start(
        self, argv: list[str], *, env: dict[str, str], timeout_s: float, cwd: str | Path | None = None
    ) -> LocalProcess:
        if self._closed:
            raise EnvError("sandbox is closed")
        log = self.root / "logs" / f"{len(self._processes)}-{Path(argv[0]).name}.log"
        try:
            popen = self._popen(argv, env, self._cwd(cwd), log)
        except OSError as exc:
            raise EnvError(f"could not start {argv[0]!r}: {exc}") from exc
        process = LocalProcess(popen, log, self.id, timeout_s, wrapped=self._isolation == "bwrap")
        self._processes.append(process)
        return process

    def run(
        self, argv: list[str], *, env: dict[str, str] | None = None, timeout_s: float = 120,
        cwd: str | Path | None = None,
    ) -> CommandResult:
        process = self.start(argv, env=env or {}, timeout_s=timeout_s, cwd=cwd)
        status = process.wait(timeout_s + 10)
        process.kill()
        return CommandResult(
            argv=argv,
            exit_code=process.exit_code(),
            output=process.output_tail(200_000),
            timed_out=status == "timeout",
        )

    def leftover_pids(self) -> list[int]:
        return sorted(p.pid for p in _marked(lambda value: value == self.id))

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.end_agent()
        for bridge in self._bridges:
            bridge.close()
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _check_workdir(workdir: str) -> str:
    """The workdir must be an absolute path of its own, not `/` nor inside a system folder."""
    path = PurePosixPath(workdir)
    if not path.is_absolute() or ".." in path.parts or len(path.parts) < 2:
        raise BadRequest(f"workdir must be an absolute folder below /, got {workdir!r}")
    if path.parts[1] in {"usr", "etc", "bin", "sbin", "lib", "lib64", "proc", "dev", "sys", "tests", "solution",
                         "logs"}:
        raise BadRequest(f"workdir {workdir!r} lies in a system or Harbor folder; pick one such as /app")
    return str(path)


def _ip_binary() -> str | None:
    return shutil.which("ip") or next((p for p in ("/usr/sbin/ip", "/sbin/ip") if os.path.exists(p)), None)
