"""DockerSandbox: one episode in one container whose only network is the capture proxy.

The container runs with `--network none`, a read-only root filesystem, dropped capabilities, a non-root
user and cpu/memory/pids limits. The episode's folders live on this host. HOME, TMPDIR and the process
logs are bind-mounted at the *same* absolute paths (the harness config written on the host is where the
harness looks for it); the workspace is mounted at the task's workdir (`/app`, or its WORKDIR), and
Harbor's folders at Harbor's paths: `/tests` and `/solution` read-only (filled from the host only when
their turn comes), `/logs/verifier` and `/logs/agent` writable. Task scripts run unchanged.

Grading (`verifier.verify`, shared mode): `end_agent()` removes the agent's container, every process in
it with it (PID 1 and the main process too, which a same-uid agent could `ptrace` into writing the
reward), and starts a fresh grading container on the same host folders (from a commit of the old one
when the root filesystem was writable), with no network and no process of the agent's. Then
`/logs/verifier` is emptied, the tests are staged, `test.sh` runs with a fresh HOME. `verify_isolated`
(separate mode) grades a copy of the post-episode workspace in a fresh container instead.

Who is who: the agent and the tests run as `DOCKER_UID` (61001 by default), a uid that no host account
may have (checked at start: a host user with the agent's uid could write its files and trace its
processes); the container's init, main process and forwarders run as root with every capability
dropped (when openenv runs as root), so the agent cannot trace or signal them. The sandbox root is
`0700`, the proxy's unix sockets `0600`.

The proxy is reached like in `LocalSandbox(network="loopback")`: a unix socket bridged to 127.0.0.1 on
this host is mounted in, and `forwarder.py` (stdlib only, run by the container's python3) listens on
127.0.0.1:PORT inside. The container's main process sleeps for `lifetime_s` and the container is
auto-removed when it ends, a dead man's switch for owners that die without `close()`.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import tempfile
import threading
import time
import uuid
import weakref
from pathlib import Path
from typing import Any, ClassVar, Self

import docker
import docker.errors
from docker.types import Mount

from openenv.errors import EnvError, SandboxLost
from openenv.harness import forwarder
from openenv.harness.sandbox import sweeper
from openenv.harness.sandbox.base import CommandResult, Limits, container_relpath, run_to_end
from openenv.harness.sandbox.base_image import base_image_hint
from openenv.harness.sandbox.docker_engine import (
    DEFAULT_IMAGE,
    DEFAULT_USER,
    DOCKER_UID,
    IMAGE_PATH,
    ContainerLimits,
    engine_available,
    engine_errors,
    ulimits,
)
from openenv.harness.sandbox.docker_process import (
    END_AGENT_SNIPPET,
    KILL_SNIPPET,
    LIST_SNIPPET,
    MAIN_PID_SNIPPET,
    MARKER,
    POLL_S,
    DockerProcess,
)
from openenv.harness.sandbox.files import HostFolders, drop_links, write_tree
from openenv.harness.sandbox.identity import SANDBOX_USER, check_free_uid, private_root, write_identity
from openenv.harness.tasks.model import FileData

__all__ = [
    "DEFAULT_IMAGE",
    "DEFAULT_USER",
    "DOCKER_UID",
    "HARBOR_MOUNTS",
    "ContainerLimits",
    "DockerProcess",
    "DockerSandbox",
    "engine_available",
]

FORWARDER_PATH = "/opt/openenv/forwarder.py"
# Harbor's folders: container path -> (host folder under the sandbox root, writable by the container).
HARBOR_MOUNTS = {
    "/tests": ("harbor/tests", False),
    "/solution": ("harbor/solution", False),
    "/logs/verifier": ("harbor/verifier", True),
    "/logs/agent": ("harbor/agent", True),
}


_OPEN: weakref.WeakSet[DockerSandbox] = weakref.WeakSet()
_SWEPT = threading.Event()


@atexit.register
def _close_all() -> None:
    for sandbox in list(_OPEN):
        with contextlib.suppress(Exception):
            sandbox.close()


class DockerSandbox(HostFolders):
    """One episode in one container: no network but the forwarded proxy ports, limits, guaranteed removal.

    Args:
        image: the image to run; it needs `sh` and `python3` (for the forwarder and process control).
        limits: per-process rlimits, applied as container ulimits.
        container_limits: cgroup limits for the whole container.
        forward_ports: 127.0.0.1 ports on this host (the capture proxy) reachable at the same
            127.0.0.1 port inside the container.
        mounts: host paths mounted read-only at the same path (harness installs, Node).
        workdir: the container path of the workspace (the task's WORKDIR; `/app` for Harbor tasks).
        user: `uid:gid` to run the agent and the tests as; the episode folders are handed to it. A uid a
            host account has is refused. None runs as root (still with every capability dropped).
        read_only: mount the image's root filesystem read-only (/tmp is an in-memory tmpfs).
        expose_private: also mount `private_dir`s (only for verifier containers).
        lifetime_s: the container removes itself after this long, whatever happens to its owner.
        grading: a container only for grading (no agent ever ran in it): `end_agent()` does not replace it.
        client: a Docker SDK client (default: `docker.from_env()`).

    Raises:
        EnvError: no engine, a missing image, or the container did not come up.
    """

    # What `launch` checks a harness install against: only the harness cache is mounted from this host.
    kind: ClassVar[str] = "docker"

    def __init__(
        self,
        *,
        image: str = DEFAULT_IMAGE,
        limits: Limits | None = None,
        container_limits: ContainerLimits | None = None,
        forward_ports: tuple[int, ...] = (),
        mounts: tuple[Path, ...] = (),
        user: str | None = DEFAULT_USER,
        read_only: bool = True,
        expose_private: bool = False,
        lifetime_s: float = 4 * 3600,
        client: docker.DockerClient | None = None,
        workdir: str = "/app",
        grading: bool = False,
    ) -> None:
        self.id = uuid.uuid4().hex[:12]
        self.image = image
        if not workdir.startswith("/") or workdir in ("/", *HARBOR_MOUNTS) or ".." in workdir.split("/"):
            raise EnvError(f"workdir must be an absolute path of its own, got {workdir!r}")
        self._workdir = workdir
        self._main_pid = 0
        # Set when the workspace already holds the task's starting files (taken from a built image).
        self.workspace_ready = False
        self._limits = limits or Limits()
        self._container_limits = container_limits or ContainerLimits()
        self._mounts = tuple(Path(m).resolve() for m in mounts)
        self._user = user
        self._uid, self._gid = (int(x) for x in user.split(":")) if user else (0, 0)
        check_free_uid(self._uid, what="the Docker sandbox's", variable="OPENENV_DOCKER_UID (or user=)")
        # Init, the main process and the forwarders: root without capabilities when we are root, so the
        # agent's uid can neither trace nor signal them.
        self._main_user = "0:0" if os.geteuid() == 0 else (user or "0:0")
        self._grading = grading
        self._graded_image: str | None = None
        self._lifetime_s = lifetime_s
        self._read_only = read_only
        self._expose_private = expose_private
        self._processes: list[DockerProcess] = []
        self._bridges: list[forwarder.UnixToTcpBridge] = []
        self._closed = False
        self._stopped = False
        self._lost: str | None = None
        self.container: Any = None
        self._fresh_options: dict[str, Any] = {
            "image": image,
            "limits": limits,
            "container_limits": container_limits,
            "mounts": mounts,
            "user": user,
            "read_only": read_only,
            "lifetime_s": lifetime_s,
            "workdir": workdir,
        }
        with engine_errors("connect to the engine"):
            self.client = client or docker.from_env()
        self.api = self.client.api
        if not _SWEPT.is_set():  # once per process: containers of owners that died without close()
            _SWEPT.set()
            with engine_errors("sweep orphaned sandboxes"):
                sweeper.sweep(self.client)
        self.root = private_root(Path(tempfile.mkdtemp(prefix=sweeper.ROOT_PREFIX)))
        _OPEN.add(self)
        try:
            self._prepare(forward_ports)
            self._launch(forward_ports, lifetime_s)
        except BaseException:
            self.close()
            raise

    # -- setup ---------------------------------------------------------------------------------------

    def _prepare(self, ports: tuple[int, ...]) -> None:
        for sub in ("workspace", "home", "tmp", "logs", "private", "grader"):
            (self.root / sub).mkdir()
            self.hand_over(self.root / sub)
        (self.root / "sock").mkdir()  # ours (the forwarders write their ready files as root): not handed over
        if self._user:
            write_identity(self.root / "etc", self._uid, self.home)
        for sub, writable in HARBOR_MOUNTS.values():
            (self.root / sub).mkdir(parents=True)
            if writable:
                self.hand_over(self.root / sub)
        self._bridges = [
            forwarder.UnixToTcpBridge(self.root / "sock" / f"p{port}.sock", "127.0.0.1", port).start()
            for port in ports
        ]
        main_uid, main_gid = (int(x) for x in self._main_user.split(":"))
        for bridge in self._bridges:  # only the container's forwarder (its main user) connects: never 0666
            if main_uid != os.geteuid():
                os.chown(bridge.socket_path, main_uid, main_gid)
            bridge.socket_path.chmod(0o600)

    def hand_over(self, path: Path) -> None:
        """Give the container user ownership of `path` (and below), so it can write what we wrote.

        Never follows a symlink: the agent controls these folders, and a link to `/` must not make us
        chown the host.
        """
        if self._uid == os.geteuid():
            return
        with contextlib.suppress(FileNotFoundError):
            os.lchown(path, self._uid, self._gid)
        for folder, dirs, files in os.walk(path, followlinks=False):
            for name in [*dirs, *files]:
                with contextlib.suppress(FileNotFoundError):
                    os.lchown(os.path.join(folder, name), self._uid, self._gid)

    def _bind_mounts(self) -> list[Mount]:
        writable = ["home", "tmp", "logs", "sock"] + (["private"] if self._expose_private else [])
        writable += ["grader"] if self._grading else []  # the verifier's HOME: never in an agent's container
        mounts = [Mount(str(self.root / sub), str(self.root / sub), type="bind") for sub in writable]
        mounts.append(Mount(self._workdir, str(self.workspace), type="bind"))
        mounts += [
            Mount(target, str(self.root / sub), type="bind", read_only=not writable)
            for target, (sub, writable) in HARBOR_MOUNTS.items()
        ]
        mounts.append(
            Mount(FORWARDER_PATH, str(Path(forwarder.__file__).resolve()), type="bind", read_only=True)
        )
        mounts += [Mount(str(path), str(path), type="bind", read_only=True) for path in self._mounts]
        if (
            self._user
        ):  # the agent's uid by name (whoami, Node's os.userInfo()), whatever the image's passwd says
            mounts += [
                Mount(f"/etc/{name}", str(self.root / "etc" / name), type="bind", read_only=True)
                for name in ("passwd", "group")
            ]
        return mounts

    def _main_script(self, ports: tuple[int, ...], lifetime_s: float) -> str:
        sock = self.root / "sock"
        parts = [
            f"python3 {FORWARDER_PATH} --listen 127.0.0.1:{p} --to-unix {sock}/p{p}.sock --ready {sock}/p{p}.ready &"
            for p in ports
        ]
        return " ".join([*parts, f"exec sleep {int(lifetime_s)}"])

    def _launch(self, ports: tuple[int, ...], lifetime_s: float, image: str | None = None) -> None:
        cl = self._container_limits
        labels = {
            sweeper.KIND_LABEL: "docker",
            sweeper.OWNER_LABEL: sweeper.owner_label(),
            sweeper.EPISODE_LABEL: self.id,
            sweeper.ROOT_LABEL: str(self.root),
            **sweeper.run_labels(),
        }
        image = image or self.image
        with engine_errors(f"start a container from {image!r}"):
            try:  # never `containers.run`: it pulls a missing image, and no registry is reachable
                self.client.images.get(image)
            except docker.errors.ImageNotFound as exc:
                raise EnvError(
                    f"sandbox image {image!r} is not built; {base_image_hint()}, or `openenv build "
                    "HARNESS --sandbox`"
                ) from exc
            self.container = self.client.containers.create(
                image,
                ["/bin/sh", "-c", self._main_script(ports, lifetime_s)],
                name=f"openenv-{self.id}",
                auto_remove=True,
                init=True,
                network_mode="none",
                hostname="sandbox",
                user=self._main_user,
                labels=labels,
                mounts=self._bind_mounts(),
                read_only=self._read_only,
                tmpfs={"/tmp": f"size={cl.tmpfs_mb}m,mode=1777", "/run": "size=16m,mode=1777"},
                working_dir=self._workdir,
                environment={"PATH": IMAGE_PATH, "HOME": str(self.home)},
                nano_cpus=int(cl.cpus * 1e9),
                mem_limit=f"{cl.memory_mb}m",
                memswap_limit=f"{cl.memory_mb}m",
                pids_limit=cl.pids,
                ulimits=ulimits(self._limits),
                cap_drop=["ALL"],
                security_opt=["no-new-privileges"],
            )
            self.container.start()  # set first: close() removes a created-but-failed one
        # Before any agent process exists, PID 1's only child is the main process: end_agent spares it.
        found = self._exec_snippet(MAIN_PID_SNIPPET, "").split()
        self._main_pid = int(found[0]) if len(found) == 1 else 0

    def _await_proxy(self, timeout_s: float = 15) -> str:
        """Shell that waits (in the container) for the forwarders, so the engine's start overlaps theirs."""
        ready = [f"{self.root}/sock/p{bridge.socket_path.stem[1:]}.ready" for bridge in self._bridges]
        if not ready:
            return ""
        missing = " || ".join(f"[ ! -e {path} ]" for path in ready)
        return (
            f"i=0; while {{ {missing}; }} && [ $i -lt {int(timeout_s * 50)} ]; do sleep 0.02; i=$((i+1)); done; "
            f"[ $i -lt {int(timeout_s * 50)} ] || echo '[openenv] the proxy forwarder did not start' >>\"$0\"; "
        )

    # -- the Sandbox protocol -----------------------------------------------------------------------

    @property
    def workdir(self) -> str:
        """Where the workspace is inside the container (the task's WORKDIR)."""
        return self._workdir

    def host_path(self, container_path: str) -> Path:
        """The host folder behind a container path (the workdir or a Harbor folder, or below one).

        Raises:
            BadRequest: the path is not under one of them, or has a `..` part.
        """
        roots = {
            self._workdir: self.workspace,
            **{t: self.root / sub for t, (sub, _) in HARBOR_MOUNTS.items()},
        }
        root, below = container_relpath(container_path, tuple(roots))
        return roots[root] / below

    def stage(self, container_path: str, files: dict[str, FileData], *, readonly: bool = True) -> None:
        """Write `files` under `container_path` from the host. `readonly`: owned by root, mode 0444/0555,
        so the container's non-root user cannot change them (the mounts of /tests and /solution are
        read-only besides)."""
        base = self.host_path(container_path)
        write_tree(base, files, mode=0o555 if readonly else 0o755)
        if not readonly:
            self.hand_over(base)

    def end_agent(self) -> None:
        """End the agent: the first time, replace its container by a fresh grading one (`_regrade`); after
        that (the tests' own leftovers), kill every process in the container except init and the main one,
        and return when none is left. Idempotent."""
        if self._stopped or self.container is None or self.lost_reason() is not None:
            return
        if not self._grading:
            self._regrade()
            return
        for process in self._processes:
            process.mark_killed()
        result = self.container.exec_run(
            ["python3", "-I", "-S", "-c", END_AGENT_SNIPPET, str(self._main_pid)], user=self._user or "0:0"
        )
        if result.exit_code != 0:
            raise EnvError(
                f"could not end the agent's processes: {result.output.decode(errors='replace')[-300:]}"
            )
        for process in self._processes:
            process.status()

    def _regrade(self) -> None:
        """Remove the agent's container (every process in it dies, PID 1 and the main one included: no
        `ptrace`d survivor, no helper run through a PATH the agent changed) and start a grading container
        on the same host folders. A writable root filesystem is committed first and graded from that
        image, so what the agent installed is still there; a read-only one had nothing to keep. The
        in-memory /tmp does not carry over."""
        image = None
        if not self._read_only:
            with engine_errors("commit the agent's container for grading"):
                committed = self.container.commit(
                    repository=f"openenv-graded-{self.id}",
                    tag="latest",
                    conf={"Labels": sweeper.sandbox_labels()},
                )
            image = self._graded_image = committed.id
        self.stop()
        self._stopped = False
        self._grading = True
        self._bridges = []
        self._launch((), self._lifetime_s, image=image)

    def fresh_home(self) -> str:
        """The grader's empty HOME (with `tmp/`), mounted only in grading containers: a `~/.gitconfig` or
        `~/.local` hook the agent planted in its own HOME never runs in the tests."""
        if not self._grading:
            raise EnvError("fresh_home() is for grading: call end_agent() first")
        return super().fresh_home()

    def environment(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        """The container process environment: the image's PATH, the episode's HOME/TMPDIR, plus `extra`."""
        env = {
            "PATH": IMAGE_PATH,
            "LANG": "C.UTF-8",
            "HOME": str(self.home),
            "TMPDIR": str(self.root / "tmp"),
            "USER": SANDBOX_USER,
        }
        env.update(extra or {})
        return env

    def start(
        self, argv: list[str], *, env: dict[str, str], timeout_s: float, cwd: str | Path | None = None
    ) -> DockerProcess:
        if self._stopped:
            raise EnvError("sandbox is closed (or stopped for grading)")
        if self._lost is not None:
            raise SandboxLost(self._lost)
        private = str(self.root / "private")
        if not self._expose_private and any(private in v for v in [*argv, *env.values(), str(cwd)]):
            raise EnvError(
                "this command needs a private_dir (hidden tests), which the episode container "
                "never sees; grade with docker_episode.verify_isolated(sandbox, task) instead of verify()"
            )
        self.hand_over(self.workspace)
        self.hand_over(self.home)
        tag = f"{MARKER}={self.id}:{len(self._processes)}"
        log = self.root / "logs" / f"{len(self._processes)}-{Path(argv[0]).name}.log"
        wrapped = ["/bin/sh", "-c", f'{self._await_proxy()}exec "$@" >>"$0" 2>&1', str(log), *argv]
        environment = {**self.environment(env), MARKER: tag.partition("=")[2]}
        with engine_errors(f"start {argv[0]!r}"):
            exec_id = self.api.exec_create(
                self.container.id,
                wrapped,
                environment=environment,
                workdir=str(cwd or self._workdir),
                user=self._user or "0:0",
            )["Id"]
            self.api.exec_start(exec_id, detach=True)
        process = DockerProcess(self, exec_id, tag, log, timeout_s)
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
        process = self.start(argv, env=env or {}, timeout_s=timeout_s, cwd=cwd)
        result = run_to_end(process, argv, timeout_s)
        if self._expose_private:
            drop_links(self.root / "private")  # the host reads these next (rewards): never through a link
        drop_links(self.root / HARBOR_MOUNTS["/logs/verifier"][0])
        if process.lost:
            raise SandboxLost(self.lost_reason() or f"sandbox lost while running {argv[0]!r}")
        return result

    def _exec_snippet(self, snippet: str, arg: str) -> str:
        if self._stopped or self.lost_reason() is not None:
            return ""
        try:
            result = self.container.exec_run(
                ["python3", "-I", "-S", "-c", snippet, arg], user=self._user or "0:0"
            )
        except docker.errors.DockerException:
            return ""
        return result.output.decode("utf-8", "replace")

    def signal_marked(self, tag: str) -> None:
        """Kill every process in the container carrying `tag` (a process and all its descendants)."""
        self._exec_snippet(KILL_SNIPPET, tag)

    def leftover_pids(self) -> list[int]:
        """Pids (in the container) of processes started here that are still alive; empty after close."""
        out = self._exec_snippet(LIST_SNIPPET, f"{MARKER}={self.id}:")
        return sorted(int(line) for line in out.split())

    def lost_reason(self) -> str | None:
        """Why the container is gone or stopped, if it is (checked against the engine), else None."""
        if self._lost is None and not self._stopped and self.container is not None:
            try:
                self.container.reload()
                state = self.container.attrs["State"]
                if state.get("Status") != "running":
                    self._lost = (
                        f"sandbox lost: container {self.container.short_id} is {state.get('Status')} "
                        f"(exit {state.get('ExitCode')}, OOMKilled={state.get('OOMKilled')})"
                    )
            except docker.errors.NotFound:
                self._lost = f"sandbox lost: container openenv-{self.id} was removed from outside"
            except docker.errors.DockerException as exc:
                self._lost = f"sandbox lost: the engine stopped answering ({exc})"
        return self._lost

    def runs_commands(self) -> bool:
        """Whether a new command still starts in the container (a no-op `sh -c :`).

        The engine records a killed container's processes as ended before the container itself (it
        tears the container's network and mounts down in between): a process that died of a signal in
        that gap would read as a crash inside a healthy container. Asked only then, so it costs one exec per
        process killed by a signal, never per poll.
        """
        if self._stopped or self.container is None:
            return True  # removed by us: its processes were marked killed first
        try:
            result = self.container.exec_run(["/bin/sh", "-c", ":"], user=self._user or "0:0")
        except docker.errors.DockerException:
            return False
        return result.exit_code == 0

    def stop(self) -> None:
        """Remove the container (every process dies) but keep the episode's files for reading back."""
        self._stopped = True
        for process in self._processes:
            process.mark_killed()
        if self.container is not None:
            try:
                self.container.remove(force=True, v=True)
            except docker.errors.NotFound:
                pass
            except docker.errors.APIError as exc:
                if exc.status_code != 409:  # removal already in progress (auto-remove)
                    raise EnvError(f"could not remove container {self.container.short_id}: {exc}") from exc
            self._wait_gone()
        for process in self._processes:
            process.status()
        for bridge in self._bridges:
            bridge.close()

    def _wait_gone(self, timeout_s: float = 10) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                self.container.reload()
            except docker.errors.NotFound:
                return
            time.sleep(POLL_S)

    def close(self) -> None:
        if self._closed:
            return
        try:
            self.stop()
        finally:
            self._closed = True
            _OPEN.discard(self)
            shutil.rmtree(self.root, ignore_errors=True)
            if self._graded_image is not None:
                with contextlib.suppress(docker.errors.DockerException):
                    self.client.images.remove(self._graded_image, force=True)

    def fresh(self, *, expose_private: bool = True) -> DockerSandbox:
        """A new sandbox with this one's image, limits, mounts and user, and no network at all."""
        return DockerSandbox(
            **self._fresh_options, expose_private=expose_private, client=self.client, grading=True
        )

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
