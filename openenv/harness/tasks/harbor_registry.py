"""Harbor datasets by name: `NAME@VERSION` resolved through a Harbor registry, as `harbor==0.25.0` does.

A registry is a JSON list of datasets, `{name, version, description, tasks: [{name, git_url, git_commit_id,
path}]}` (Harbor's `models/registry.py`; `JsonRegistryClient`). Each task is the folder `path` of the git
repository `git_url` at `git_commit_id` (the newest commit when none is pinned), or, in a registry file
on this machine, a folder relative to that file when `git_url` is absent. `NAME` alone picks the version
Harbor would: `head`, else the highest PEP 440 version, else the lexically last.

The registry is `--registry PATH|URL`, else `$OPENENV_HARBOR_REGISTRY`, else Harbor's public one.
Everything fetched is cached under `<cache>/openenv/harbor/`: the registry (used when it cannot be read
again, so a machine gone offline resolves what it resolved before) and each task by repository, commit
and path (a pinned commit is fetched once, ever). A task that escapes its folder is refused, as Harbor
refuses it: an absolute path, a `..` leaving the repository, a link on the way to it, or a link inside it
that is absolute or leads out of the task.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import tempfile
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath

from pydantic import BaseModel, ConfigDict, ValidationError

from openenv.errors import BadRequest, EnvError, NotFound

__all__ = [
    "DEFAULT_REGISTRY",
    "REGISTRY_ENV",
    "DatasetSpec",
    "RegistryTask",
    "is_dataset_spec",
    "load_registry",
    "resolve_dataset",
]

DEFAULT_REGISTRY = (
    "https://raw.githubusercontent.com/laude-institute/harbor/main/registry.json"  # harbor.constants
)
REGISTRY_ENV = "OPENENV_HARBOR_REGISTRY"
_SPEC = re.compile(r"^(?P<name>[A-Za-z0-9][\w.\-/]*)@(?P<version>[A-Za-z0-9][\w.\-+]*)$")
_COMMIT = re.compile(r"^[0-9a-fA-F]{40}$|^[0-9a-fA-F]{64}$")
Progress = Callable[[str], None]


class RegistryTask(BaseModel):
    """One task of a dataset (Harbor's `RegistryTaskId`)."""

    model_config = ConfigDict(extra="ignore")

    name: str
    git_url: str | None = None
    git_commit_id: str | None = None
    path: str


class DatasetSpec(BaseModel):
    """One dataset version of a registry (Harbor's `DatasetSpec`)."""

    model_config = ConfigDict(extra="ignore")

    name: str
    version: str
    description: str = ""
    tasks: list[RegistryTask]


def is_dataset_spec(name: str) -> bool:
    """Whether a task-set name is a Harbor dataset reference `NAME@VERSION` (not a path here)."""
    return bool(_SPEC.match(name)) and not Path(name).exists()


def _cache_root() -> Path:
    from openenv.resources import cache_dir

    root = cache_dir() / "harbor"
    root.mkdir(parents=True, exist_ok=True)
    return root


def _key(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:24]


def _registry_location(registry: str | None) -> str:
    chosen = registry or os.environ.get(REGISTRY_ENV) or DEFAULT_REGISTRY
    if "://" not in chosen:
        return str(Path(chosen).expanduser().resolve())
    return chosen


def _read_registry(location: str) -> str:
    scheme = urllib.parse.urlparse(location).scheme
    if scheme == "":
        return Path(location).read_text()
    if scheme not in ("http", "https", "file"):
        raise BadRequest(f"Harbor registry {location!r}: only a file path or an http(s)/file URL is read")
    with urllib.request.urlopen(location, timeout=60) as response:
        return response.read().decode("utf-8")


def load_registry(
    registry: str | None = None, *, progress: Progress | None = None
) -> tuple[list[DatasetSpec], str]:
    """The datasets of a registry and where it was read (`registry`, `$OPENENV_HARBOR_REGISTRY`, or
    Harbor's public one); the copy cached by the last good read when it cannot be read now.

    Raises:
        NotFound: the registry cannot be read and was never read before.
        BadRequest: it is not a Harbor registry (the message names the first bad entry).
    """
    location = _registry_location(registry)
    cached = _cache_root() / "registries" / f"{_key(location)}.json"
    try:
        text = _read_registry(location)
    except (OSError, ValueError) as exc:
        if not cached.is_file():
            raise NotFound(
                f"Harbor registry {location} cannot be read ({exc}) and was never cached here; "
                f"set --registry or {REGISTRY_ENV}"
            ) from None
        (progress or (lambda line: None))(f"registry {location} unreachable ({exc}); using its cached copy")
        text = cached.read_text()
    else:
        cached.parent.mkdir(parents=True, exist_ok=True)
        _atomic_write(cached, text)
    try:
        rows = json.loads(text)
        if not isinstance(rows, list):
            raise BadRequest(f"Harbor registry {location} is not a JSON list of datasets")
        return [DatasetSpec.model_validate(row) for row in rows], location
    except (ValueError, ValidationError) as exc:
        raise BadRequest(
            f"Harbor registry {location} is not a Harbor registry: {str(exc).splitlines()[0]}"
        ) from None


def _pick(datasets: list[DatasetSpec], spec: str, location: str) -> DatasetSpec:
    name, _, version = spec.partition("@")
    versions = {d.version: d for d in datasets if d.name == name}
    if not versions:
        near = sorted({d.name for d in datasets})[:20]
        raise NotFound(f"Harbor registry {location} has no dataset {name!r}; it has: {', '.join(near)}")
    if not version:
        version = _newest(list(versions))
    if version not in versions:
        raise NotFound(
            f"dataset {name!r} has no version {version!r} in {location}; it has: {', '.join(versions)}"
        )
    return versions[version]


def _newest(versions: list[str]) -> str:
    """Harbor's `resolve_version`: `head`, else the highest PEP 440 version, else the lexically last."""
    from packaging.version import InvalidVersion, Version

    if "head" in versions:
        return "head"
    parsed = []
    for v in versions:
        with contextlib.suppress(InvalidVersion):
            parsed.append((Version(v), v))
    return max(parsed)[1] if parsed else sorted(versions)[-1]


def _task_path(path: str) -> PurePosixPath:
    """Harbor's `normalize_git_task_path`: relative, and a `..` never leaves the repository."""
    raw = PurePosixPath(path)
    if raw.is_absolute() or "\\" in path or "\x00" in path:
        raise BadRequest(f"task path {path!r} is absolute; a task path is relative to its repository")
    parts: list[str] = []
    for part in raw.parts:
        if part == "..":
            if not parts:
                raise BadRequest(f"task path {path!r} leaves its repository")
            parts.pop()
        elif part != ".":
            parts.append(part)
    if not parts:
        raise BadRequest(f"task path {path!r} names the repository itself, not a task folder in it")
    return PurePosixPath(*parts)


def _git(*args: str, cwd: Path | None = None) -> str:
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_LFS_SKIP_SMUDGE": "1"}
    done = subprocess.run(
        ["git", "-c", "core.hooksPath=/dev/null", "-c", "submodule.recurse=false", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=env,
        timeout=1800,
        check=False,
    )
    if done.returncode != 0:
        raise EnvError(
            f"git {args[0]} failed: {' '.join((done.stderr or done.stdout).strip().splitlines()[-1:])}"
        )
    return done.stdout.strip()


def _checkout(url: str, commit: str | None, into: Path) -> str:
    """A checkout of `url` at `commit` (its default branch's head when None) in `into`; returns the commit."""
    _git("init", "-q", str(into))
    try:
        _git("fetch", "-q", "--depth", "1", url, commit or "HEAD", cwd=into)
    except EnvError:
        if commit is None:
            raise
        _git(
            "fetch", "-q", url, "+refs/heads/*:refs/remotes/origin/*", cwd=into
        )  # a server refusing wants by id
    _git("-c", "advice.detachedHead=false", "checkout", "-q", commit or "FETCH_HEAD", cwd=into)
    head = _git("rev-parse", "HEAD", cwd=into)
    if commit is not None and not head.startswith(commit.lower()):
        raise EnvError(f"{url} at {commit} checked out {head}")
    return head


def _copy_task(repo: Path, relative: PurePosixPath, target: Path) -> None:
    """Copy the task folder out of a checkout, refusing links on the way to it, absolute links and
    links leading out of it; links inside it become copies (as Harbor materializes them)."""
    current = repo
    for part in relative.parts:
        current = current / part
        if current.is_symlink():
            raise BadRequest(
                f"task path {relative} passes through a link ({current.relative_to(repo)}); "
                "a task folder must be a plain folder of its repository"
            )
    if not current.is_dir():
        raise NotFound(f"the repository has no task folder {relative}")
    source = current.resolve()

    def copy(path: Path, dest: Path, seen: frozenset[Path]) -> None:
        shown = path.relative_to(current) if path != current else PurePosixPath(".")
        if path.is_symlink():
            link = os.readlink(path)
            if os.path.isabs(link):
                raise BadRequest(
                    f"task {relative}: {shown} is an absolute link ({link}); links must stay in the task"
                )
        try:
            resolved = path.resolve(strict=True)
        except (OSError, RuntimeError):
            raise BadRequest(f"task {relative}: {shown} is a broken or looping link") from None
        if not resolved.is_relative_to(source):
            raise BadRequest(f"task {relative}: {shown} links outside the task folder")
        mode = resolved.stat().st_mode
        if stat.S_ISDIR(mode):
            if resolved in seen:
                raise BadRequest(f"task {relative}: {shown} links back to a folder above it")
            dest.mkdir()
            for child in sorted(resolved.iterdir()):
                if child.name != ".git":
                    copy(child, dest / child.name, seen | {resolved})
        elif stat.S_ISREG(mode):
            shutil.copyfile(resolved, dest)
            dest.chmod(0o755 if mode & 0o111 else 0o644)
        else:
            raise BadRequest(f"task {relative}: {shown} is not a file or folder")

    copy(current, target, frozenset())


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(text)
    tmp.replace(path)


def _fetch_task(task: RegistryTask, location: str, progress: Progress) -> Path:
    """The cached folder of one registry task, fetched first unless its pinned commit is cached."""
    relative = _task_path(task.path)
    folder_name = relative.name
    if task.git_url is None:  # a local task: only a registry file on this machine may name one
        if "://" in location:
            raise BadRequest(
                f"task {task.name!r} of registry {location} names a folder on this machine "
                f"({task.path}) without a git_url; only a registry file may"
            )
        home = _cache_root() / "tasks" / _key("local", location, str(relative))
        with _locked(home.with_suffix(".lock")):
            (_cache_root() / "tmp").mkdir(exist_ok=True)
            with tempfile.TemporaryDirectory(dir=_cache_root() / "tmp") as tmp:
                staged = Path(tmp) / "task"
                staged.mkdir()
                _copy_task(Path(location).parent, relative, staged / folder_name)
                if home.exists():
                    shutil.rmtree(home)
                staged.rename(home)
        return home / folder_name
    pinned = task.git_commit_id if task.git_commit_id and _COMMIT.match(task.git_commit_id) else None
    if task.git_commit_id and not pinned:
        raise BadRequest(f"task {task.name!r}: git_commit_id {task.git_commit_id!r} is not a full commit id")
    home = _cache_root() / "tasks" / _key(task.git_url, pinned or "HEAD", str(relative))
    done = home / folder_name
    if pinned and (home / "commit").is_file():
        return done
    with _locked(home.with_suffix(".lock")):
        if pinned and (home / "commit").is_file():
            return done  # another process fetched it while we waited
        progress(f"fetching task {task.name} from {task.git_url}" + (f" at {pinned[:12]}" if pinned else ""))
        (_cache_root() / "tmp").mkdir(exist_ok=True)
        try:
            with tempfile.TemporaryDirectory(dir=_cache_root() / "tmp") as tmp:
                repo = Path(tmp) / "repo"
                commit = _checkout(task.git_url, pinned, repo)
                staged = Path(tmp) / "task"
                staged.mkdir()
                _copy_task(repo, relative, staged / folder_name)
                (staged / "commit").write_text(commit + "\n")
                if home.exists():
                    shutil.rmtree(home)
                staged.rename(home)
        except EnvError:
            if (
                not pinned and (home / "commit").is_file()
            ):  # the newest commit, unreachable now: the last one seen
                progress(f"{task.git_url} unreachable; using the cached copy of task {task.name}")
                return done
            raise
    return done


_RESOLVED: dict[tuple[str, str], list[Path]] = {}


def resolve_dataset(
    spec: str, *, registry: str | None = None, progress: Progress | None = None
) -> list[Path]:
    """The task folders of dataset `spec` (`NAME@VERSION`, or `NAME` for Harbor's pick of its versions),
    fetched into the cache where needed. Resolved once per process and registry.

    Raises:
        NotFound: no such dataset or version, or the registry cannot be read and was never cached.
        BadRequest: a task escapes its folder, or an entry is malformed.
        EnvError: a task's repository cannot be fetched and is not cached.
    """
    location = _registry_location(registry)
    if (spec, location) in _RESOLVED and all(p.is_dir() for p in _RESOLVED[spec, location]):
        return list(_RESOLVED[spec, location])
    say = progress or (lambda line: None)
    datasets, location = load_registry(registry, progress=say)
    dataset = _pick(datasets, spec, location)
    folders = [_fetch_task(task, location, say) for task in dataset.tasks]
    names = [f.name for f in folders]
    if len(set(names)) != len(names):
        dupes = sorted({n for n in names if names.count(n) > 1})
        raise BadRequest(
            f"dataset {spec} has several tasks in folders named {', '.join(dupes)}; task ids must differ"
        )
    _RESOLVED[spec, location] = folders
    return list(folders)
