"""Task images without a Docker daemon: fetched from their registry, unpacked once per digest, shared.

A Harbor task that names `[environment].docker_image` runs, in the local sandbox, in that image's root
filesystem: `skopeo` copies the image from its registry (`docker://`, no daemon; the engine's own
credentials in `~/.docker/config.json` or `$REGISTRY_AUTH_FILE` are used) into a private OCI layout,
`umoci raw unpack` applies its layers (whiteouts included), and the root is kept under the user's cache
folder by manifest digest. Every episode of that digest binds the same root read-only (see
`local.LocalSandbox(image=...)`); a file lock per digest makes concurrent first episodes share one fetch
and one unpack.

The pull policy is Docker's (`OPENENV_PULL`, shared with the Docker sandbox): `missing` (default) fetches
only a reference not unpacked yet (a pinned `@sha256:` digest, or a tag seen before, needs no network),
`always` asks the registry for the tag's current digest every time (and fetches only when it changed),
`never` uses the cache only and refuses anything else with the reason.

Roots are leased: each process using a root records itself (`host/pid/start-time` and its run, from
`$OPENENV_RUN_ID`) under the root's `leases/`, removed on release. `gc()` (run by `openenv sandbox sweep`)
removes unfinished unpacks whose process died, leases of dead processes, and roots nobody holds that were
last used more than `OPENENV_ROOTFS_MAX_AGE_DAYS` (default 14) ago, or every unheld one with `everything`.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from openenv.errors import BadRequest, EnvError
from openenv.harness.sandbox.pull_policy import PULL_ENV, PullPolicy, pull_policy

__all__ = [
    "ROOTFS_CACHE_ENV",
    "ImageRoot",
    "RootfsCache",
    "copy_workdir",
    "ensure_mountpoint",
    "fetch_tools_missing",
    "resolve_in_root",
]

ROOTFS_CACHE_ENV = "OPENENV_ROOTFS_CACHE"
MAX_AGE_ENV = "OPENENV_ROOTFS_MAX_AGE_DAYS"
Progress = Callable[[str], None]
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
_LOOPBACK = re.compile(r"^(localhost|127(\.\d{1,3}){3}|\[::1\])(:\d+)?$")


def fetch_tools_missing() -> str | None:
    """What this machine lacks to fetch and unpack images without a daemon, as a sentence; None if nothing."""
    missing = [tool for tool in ("skopeo", "umoci") if shutil.which(tool) is None]
    if not missing:
        return None
    return (
        f"{' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} not installed: install them (Debian/"
        "Ubuntu: `apt-get install skopeo umoci`, or run scripts/install_sandbox.sh)"
    )


@dataclass(frozen=True)
class ImageRoot:
    """An unpacked image: its root filesystem (never written by a sandbox) and its config."""

    reference: str
    digest: str
    path: Path
    env: dict[str, str] = field(default_factory=dict)
    workdir: str | None = None
    user: str | None = None

    @property
    def rootfs(self) -> Path:
        return self.path / "rootfs"


def _run(argv: list[str], what: str, timeout_s: float = 3600) -> subprocess.CompletedProcess[str]:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        raise EnvError(f"{what}: {argv[0]} took more than {timeout_s:.0f}s") from None
    except OSError as exc:
        raise EnvError(f"{what}: could not run {argv[0]}: {exc}") from None
    if done.returncode != 0:
        answer = (done.stderr or done.stdout).strip().splitlines()
        raise EnvError(f"{what}: {' '.join(answer[-3:]) or f'{argv[0]} exited {done.returncode}'}")
    return done


def _split(reference: str) -> tuple[str, str | None]:
    """(the reference without its digest, the pinned digest or None)."""
    name, _, digest = reference.partition("@")
    if digest and not _DIGEST.fullmatch(digest):
        raise BadRequest(f"image {reference!r}: a pinned digest must be sha256:<64 hex digits>")
    return name, digest or None


def _repository(name: str) -> str:
    """`host:port/repo:tag` without its tag (skopeo takes a tag or a digest, not both)."""
    head, slash, last = name.rpartition("/")
    return f"{head}{slash}{last.partition(':')[0]}"


def _tls_flags(reference: str, flag: str) -> list[str]:
    """Registries on loopback are spoken to over plain HTTP, as Docker trusts them by default."""
    host = reference.split("/", 1)[0] if "/" in reference else ""
    return [f"{flag}=false"] if _LOOPBACK.match(host) else []


def _owner() -> str:
    import psutil

    proc = psutil.Process()
    return f"{socket.gethostname()}-{proc.pid}-{proc.create_time():.2f}"


def _owner_alive(owner: str) -> bool:
    """Whether `host-pid-start` names a live process; another host's owner counts as alive (not ours to judge)."""
    import psutil

    host, pid, started = (owner.rsplit("-", 2) + ["", "", ""])[:3]
    if host != socket.gethostname():
        return bool(host) and pid.isdigit()
    if not pid.isdigit():
        return False
    try:
        return f"{psutil.Process(int(pid)).create_time():.2f}" == started
    except psutil.NoSuchProcess:
        return False


class RootfsCache:
    """Unpacked image roots by manifest digest, under `$OPENENV_ROOTFS_CACHE` or `<cache>/openenv/rootfs`.

    Layout: `refs/` (what a reference resolved to last), `roots/<hex>/` (`rootfs/`, `image.json`,
    `leases/`), `locks/<hex>.lock` (one fetch and unpack per digest, whoever asks), `tmp/` (work in
    progress, named by its process). The cache root is 0700: an image's world-writable folders are
    nobody else's way in.
    """

    def __init__(
        self, root: Path | None = None, *, policy: PullPolicy | None = None, progress: Progress | None = None
    ) -> None:
        if root is None:
            from openenv.resources import cache_dir

            root = Path(os.environ.get(ROOTFS_CACHE_ENV) or cache_dir() / "rootfs")
        self.root = Path(root)
        self.policy = pull_policy(policy)
        self._progress = progress or (lambda line: None)
        for sub in ("refs", "roots", "locks", "tmp"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        self.root.chmod(0o700)
        self.fetches = 0  # fetched and unpacked by this object (for tests and the benchmark)

    # ---- lookup ---------------------------------------------------------------------------------

    def _ref_file(self, reference: str) -> Path:
        return self.root / "refs" / (hashlib.sha256(reference.encode()).hexdigest()[:32] + ".json")

    def _root_dir(self, digest: str) -> Path:
        return self.root / "roots" / digest.removeprefix("sha256:")

    def _load(self, reference: str, digest: str) -> ImageRoot | None:
        folder = self._root_dir(digest)
        try:
            meta = json.loads((folder / "image.json").read_text())
        except (OSError, ValueError):
            return None
        os.utime(folder / "image.json")  # last used: what gc() ages by
        return ImageRoot(
            reference=reference,
            digest=digest,
            path=folder,
            env=meta.get("env", {}),
            workdir=meta.get("workdir"),
            user=meta.get("user"),
        )

    def _remembered(self, reference: str) -> str | None:
        with contextlib.suppress(OSError, ValueError, KeyError):
            return str(json.loads(self._ref_file(reference).read_text())["digest"])
        return None

    def remote_digest(self, reference: str) -> str:
        """The digest the registry serves for `reference` now (its top-level manifest: Docker's RepoDigest)."""
        done = _run(
            ["skopeo", "inspect", "--raw", *_tls_flags(reference, "--tls-verify"), f"docker://{reference}"],
            f"could not reach the registry for image {reference}",
            timeout_s=300,
        )
        return "sha256:" + hashlib.sha256(done.stdout.encode()).hexdigest()

    def get(self, reference: str) -> ImageRoot:
        """The unpacked root of `reference`, fetched and unpacked first where the pull policy says so.

        Raises:
            EnvError: the policy is `never` and the image is not here; the tools are missing; the
                registry refused or could not be reached (its answer is in the message).
        """
        name, pinned = _split(reference)
        digest = pinned or (self._remembered(reference) if self.policy != "always" else None)
        if digest is not None and (found := self._load(reference, digest)) is not None:
            return found
        if not pinned:
            digest = None  # a tag whose root is gone: ask the registry what it names now, as Docker would
        if self.policy == "never":
            raise EnvError(
                f"image {reference} is not unpacked in {self.root} and the pull policy is never "
                f"({PULL_ENV}=never / --pull never): fetch it once with --pull missing"
            )
        if (missing := fetch_tools_missing()) is not None:
            raise EnvError(f"cannot fetch image {reference} without a Docker daemon: {missing}")
        if digest is None:
            digest = self.remote_digest(reference)
        with self._locked(digest):
            found = self._load(reference, digest)  # another episode may have unpacked it while we waited
            if found is None:
                self._fetch(f"docker://{_repository(name)}@{digest}", digest, reference)
                found = self._load(reference, digest)
                assert found is not None
        if not pinned:
            _write_json(self._ref_file(reference), {"reference": reference, "digest": digest})
        return found

    def import_from(self, transport_ref: str, digest: str, reference: str) -> ImageRoot:
        """Unpack an image from any skopeo source (`docker-daemon:TAG` for an image built here) under
        `digest` (its id), once."""
        with self._locked(digest):
            if (found := self._load(reference, digest)) is None:
                self._fetch(transport_ref, digest, reference)
                found = self._load(reference, digest)
                assert found is not None
        return found

    @contextlib.contextmanager
    def _locked(self, digest: str) -> Iterator[None]:
        lock = self.root / "locks" / (digest.removeprefix("sha256:") + ".lock")
        with lock.open("a") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    # ---- fetch and unpack -----------------------------------------------------------------------

    def _fetch(self, source: str, digest: str, reference: str) -> None:
        work = Path(tempfile.mkdtemp(prefix=f"{_owner()}.", dir=self.root / "tmp"))
        try:
            layout = work / "oci"
            self._progress(f"fetching {reference} ({digest[:19]}) without a daemon")
            started = time.monotonic()
            remote = source.startswith("docker://")
            flags = _tls_flags(source.removeprefix("docker://"), "--src-tls-verify") if remote else []
            _run(
                ["skopeo", "copy", "--quiet", *flags, source, f"oci:{layout}:image"],
                f"could not fetch image {reference}",
            )
            self._progress(f"unpacking {reference}")
            unpack = [
                "umoci",
                "raw",
                "unpack",
                *(["--rootless"] if os.geteuid() != 0 else []),
                "--image",
                f"{layout}:image",
                str(work / "rootfs"),
            ]
            _run(unpack, f"could not unpack image {reference}")
            config = _image_config(layout)
            _write_json(
                work / "image.json",
                {
                    **config,
                    "reference": reference,
                    "digest": digest,
                    "unpacked_s": round(time.monotonic() - started, 3),
                },
            )
            shutil.rmtree(layout)
            (work / "leases").mkdir()
            work.chmod(0o755)
            target = self._root_dir(digest)
            if target.exists():  # a stale half-removed root: it had no image.json, so nobody uses it
                shutil.rmtree(target)
            work.rename(target)
            self.fetches += 1
        finally:
            if work.exists():
                _rmtree(work)

    # ---- leases and garbage collection ----------------------------------------------------------

    @contextlib.contextmanager
    def lease(self, image: ImageRoot) -> Iterator[ImageRoot]:
        """Hold `image` while a sandbox uses it: `gc()` never removes a held root."""
        path = self.hold(image)
        try:
            yield image
        finally:
            path.unlink(missing_ok=True)

    def hold(self, image: ImageRoot) -> Path:
        """Record this process (and its run) as a user of `image`; unlink the returned file to release."""
        from openenv.harness.sandbox.sweeper import RUN_ENV

        leases = image.path / "leases"
        leases.mkdir(exist_ok=True)
        path = leases / f"{_owner()}.{os.urandom(4).hex()}"
        _write_json(path, {"run": os.environ.get(RUN_ENV), "reference": image.reference})
        return path

    def gc(
        self, *, everything: bool = False, max_age_s: float | None = None, run: str | None = None
    ) -> list[str]:
        """Remove what no live process holds: unfinished unpacks, dead leases, and unheld roots last used
        longer ago than `max_age_s` (default `$OPENENV_ROOTFS_MAX_AGE_DAYS`, 14 days), or every unheld
        root with `everything`. With `run`, only the leases of that run are dropped first. Returns the
        paths removed."""
        if max_age_s is None:
            max_age_s = float(os.environ.get(MAX_AGE_ENV, "14")) * 86400
        removed: list[str] = []
        for work in (self.root / "tmp").iterdir():
            if not _owner_alive(work.name.rpartition(".")[0]):
                _rmtree(work)
                removed.append(str(work))
        now = time.time()
        for folder in (self.root / "roots").iterdir():
            digest = "sha256:" + folder.name
            with self._locked(digest):
                leases = list((folder / "leases").glob("*")) if (folder / "leases").is_dir() else []
                held = False
                for lease in leases:
                    owner = lease.name.rpartition(".")[0]
                    ours = run is not None and _lease_run(lease) == run and not _owner_alive(owner)
                    if not _owner_alive(owner) or ours:
                        lease.unlink(missing_ok=True)
                    else:
                        held = True
                if held:
                    continue
                try:
                    last = (folder / "image.json").stat().st_mtime
                except OSError:
                    last = 0.0
                if everything or now - last > max_age_s:
                    _rmtree(folder)
                    removed.append(str(folder))
        return removed


def _lease_run(lease: Path) -> str | None:
    with contextlib.suppress(OSError, ValueError):
        return json.loads(lease.read_text()).get("run")
    return None


def _write_json(path: Path, data: object) -> None:
    # pid and thread: episodes of one process (threads) write the same file at once, each through its own
    # temporary, and the last rename wins whole
    tmp = path.with_name(path.name + f".tmp{os.getpid()}-{threading.get_ident()}")
    tmp.write_text(json.dumps(data, indent=1))
    tmp.replace(path)


def _rmtree(path: Path) -> None:
    """Remove an unpacked tree, whatever modes its image gave its folders (a 0555 folder, a 0000 file)."""

    def fix(func: Callable[..., object], target: str, _exc: object) -> None:
        with contextlib.suppress(OSError):
            os.chmod(os.path.dirname(target), 0o700)
            func(target)

    shutil.rmtree(path, onerror=fix)


def _image_config(layout: Path) -> dict[str, object]:
    """Env, WorkingDir and User of the one image in an OCI layout (index -> manifest -> config blob)."""

    def blob(digest: str) -> Any:  # untyped JSON from skopeo
        algo, _, hexd = digest.partition(":")
        return json.loads((layout / "blobs" / algo / hexd).read_text())

    index = json.loads((layout / "index.json").read_text())
    manifest = blob(index["manifests"][0]["digest"])
    config = blob(manifest["config"]["digest"]).get("config") or {}
    env = dict(item.partition("=")[::2] for item in config.get("Env") or [])
    return {"env": env, "workdir": config.get("WorkingDir") or None, "user": config.get("User") or None}


# ---- paths inside an unpacked root --------------------------------------------------------------


def resolve_in_root(root: Path, path: str, *, max_links: int = 40) -> Path:
    """`path` inside the image `root` with every symlink resolved as the image would see it (`/` being
    `root`): an absolute link `/etc -> /private/etc` stays in the image, never reaching the host's.

    Raises:
        BadRequest: more than `max_links` links (a loop).
    """
    parts = list(PurePosixPath(path).parts[1:] if path.startswith("/") else PurePosixPath(path).parts)
    resolved: list[str] = []
    hops = 0
    while parts:
        part = parts.pop(0)
        if part in ("", "."):
            continue
        if part == "..":
            if resolved:
                resolved.pop()
            continue
        candidate = root.joinpath(*resolved, part)
        if candidate.is_symlink():
            hops += 1
            if hops > max_links:
                raise BadRequest(f"{path} in the image: too many symbolic links")
            target = os.readlink(candidate)
            if target.startswith("/"):
                resolved = []
            parts = list(PurePosixPath(target).parts[1 if target.startswith("/") else 0 :]) + parts
            continue
        resolved.append(part)
    return root.joinpath(*resolved)


def ensure_mountpoint(root: Path, target: str, *, is_file: bool = False) -> None:
    """Make `target` exist in the unpacked `root` (an empty folder or file) so bubblewrap can bind onto
    it in the read-only image. A link on the way is refused: the mount must land where it says.

    Raises:
        EnvError: a part of `target` is a link or a file in the image.
    """
    current = root
    parts = PurePosixPath(target).parts[1:]
    for index, part in enumerate(parts):
        current = current / part
        last = index == len(parts) - 1
        if current.is_symlink():
            raise EnvError(
                f"the image has a link at {'/'.join(('',) + parts[: index + 1])}, where the sandbox "
                f"mounts {target}"
            )
        if not current.exists():
            if last and is_file:
                current.touch(mode=0o644)
            else:
                current.mkdir(mode=0o755)
        elif not last and not current.is_dir():
            raise EnvError(
                f"the image has a file at {'/'.join(('',) + parts[: index + 1])}, where the sandbox "
                f"mounts {target}"
            )


def copy_workdir(image: ImageRoot, workdir: str, dest: Path) -> int:
    """Copy the image's `workdir` (as the image resolves it) into the host folder `dest`: folders, plain
    files (mode bits kept, never setuid, no xattrs or capabilities) and links as links (the host reads
    the workspace only through `safe_join`). Devices, fifos and sockets are skipped. Returns the files."""
    source = resolve_in_root(image.rootfs, workdir)
    if not source.is_dir() or source.is_symlink():
        return 0
    copied = 0
    for folder, dirs, files in os.walk(source, followlinks=False):
        relative = Path(folder).relative_to(source)
        target_dir = dest / relative
        target_dir.mkdir(parents=True, exist_ok=True)
        for name in [*dirs, *files]:
            path, target = Path(folder) / name, target_dir / name
            if path.is_symlink():
                if not target.exists() and not target.is_symlink():
                    target.symlink_to(os.readlink(path))
                if name in dirs:
                    dirs.remove(name)
            elif path.is_file():
                shutil.copyfile(path, target, follow_symlinks=False)
                target.chmod(path.lstat().st_mode & 0o777)
                copied += 1
    return copied
