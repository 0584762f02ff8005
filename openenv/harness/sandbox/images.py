"""Sandbox images: a task's `docker_image` (pulled), a harness's `envs/<name>/Dockerfile` and a Harbor
task's `environment/Dockerfile` (built).

A task's image, or a Dockerfile's FROM image, that the engine lacks is pulled under the pull policy
(`pull.py`: `missing` by default, `never` offline), unless an explicit `--image-substitute` names an image
to use instead. Builds themselves run with no network and never pull: their FROM image is made present
first. A task image is tagged by a hash of its `environment/` folder, so an unchanged task is built once;
concurrent episodes share one build or pull of an image (`once.py`).
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import shutil
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any

import docker
import docker.errors

from openenv.errors import EnvError
from openenv.harness.catalog import harness_dir
from openenv.harness.install import install, install_status, prefix
from openenv.harness.sandbox import sweeper
from openenv.harness.sandbox.base_image import base_image_hint
from openenv.harness.sandbox.once import once
from openenv.harness.sandbox.pull import ensure_image, has_image
from openenv.harness.sandbox.pull_policy import PullPolicy, pull_policy
from openenv.harness.spec import HarnessSpec
from openenv.harness.tasks.model import Task

__all__ = [
    "OFFLINE_BASE",
    "PYTHON_IMAGE",
    "build_harness_image",
    "build_python_image",
    "build_task_image",
    "extract_workdir",
    "harness_image_tag",
    "parse_substitutes",
    "task_image",
]

OFFLINE_BASE = os.environ.get("OPENENV_BASE_IMAGE", "openenv/base:latest")
Progress = Callable[[str], None]


def harness_image_tag(spec: HarnessSpec) -> str:
    """`openenv/<harness>:<pinned version>`: the image `openenv build` makes for a harness."""
    return f"openenv/{spec.name}:{re.sub(r'[^A-Za-z0-9_.-]', '-', spec.install.version)}"


_has_image = has_image


def _build(
    client: docker.DockerClient,
    *,
    context: Path,
    dockerfile: Path,
    tag: str,
    network: str,
    buildargs: dict[str, str],
    labels: dict[str, str],
    progress: Progress,
) -> str:
    """Build `tag` once among concurrent callers (threads and processes): the rest wait and share it."""

    def work() -> str:
        if _has_image(client, tag):
            return tag  # built while this caller waited
        return _build_now(
            client,
            context=context,
            dockerfile=dockerfile,
            tag=tag,
            network=network,
            buildargs=buildargs,
            labels=labels,
            progress=progress,
        )

    return once(f"docker-build:{tag}", work, on_wait=progress)


def _build_now(
    client: docker.DockerClient,
    *,
    context: Path,
    dockerfile: Path,
    tag: str,
    network: str,
    buildargs: dict[str, str],
    labels: dict[str, str],
    progress: Progress,
) -> str:
    """Run one classic-builder build, streaming its `Step` lines to `progress`."""
    try:
        stream = client.api.build(
            path=str(context),
            dockerfile=str(dockerfile),
            tag=tag,
            rm=True,
            forcerm=True,
            decode=True,
            network_mode=network,
            pull=False,
            buildargs=buildargs,
            labels=labels,
        )
        for chunk in stream:
            if "error" in chunk:
                raise EnvError(f"building {tag} failed: {str(chunk['error']).strip()}")
            line = str(chunk.get("stream", "")).rstrip()
            if line.startswith(("Step ", "Successfully")):
                progress(line)
    except docker.errors.DockerException as exc:
        raise EnvError(f"building {tag} failed: {exc}") from exc
    return tag


def build_harness_image(
    client: docker.DockerClient,
    spec: HarnessSpec,
    *,
    base: str | None = None,
    network: str = "none",
    progress: Progress = print,
) -> str:
    """Build `envs/<harness>/Dockerfile` and return its tag.

    npm harnesses send the host's pinned install (installed first if missing) as the build context;
    `base` defaults to the offline base where it is built, else the Dockerfile's public default.

    Raises:
        EnvError: the Dockerfile is missing or the build failed (the message holds the engine's error).
    """
    dockerfile = harness_dir(spec.name) / "Dockerfile"
    if not dockerfile.is_file():
        raise EnvError(f"{dockerfile} does not exist; harness {spec.name} has no image recipe")
    context = dockerfile.parent
    if spec.install.method == "npm":
        if not install_status(spec).ready:
            progress(f"installing {spec.install.package}@{spec.install.version} on the host")
            install([spec.name])
        context = prefix(spec)
        base = base or (OFFLINE_BASE if _has_image(client, OFFLINE_BASE) else None)
    tag = harness_image_tag(spec)
    progress(f"building {tag} FROM {base or '(Dockerfile default)'}, context {context}")
    return _build(
        client,
        context=context,
        dockerfile=dockerfile,
        tag=tag,
        network=network,
        buildargs={"BASE_IMAGE": base} if base else {},
        labels={"openenv.harness": spec.name},
        progress=progress,
    )


def _folder_digest(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest.update(path.relative_to(folder).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def build_task_image(
    client: docker.DockerClient,
    task_dir: Path,
    *,
    network: str = "none",
    progress: Progress = print,
    buildargs: dict[str, Any] | None = None,
) -> str | None:
    """Build a Harbor task's `environment/Dockerfile` (once per content) and return its tag.

    Returns:
        The image tag, or None when the task defines no image (it then runs in the default image).

    Raises:
        EnvError: the build failed, e.g. its FROM image is not in the engine and nothing can be pulled.
    """
    env_dir = task_dir / "environment"
    dockerfile = env_dir / "Dockerfile"
    if not dockerfile.is_file():
        return None
    name = re.sub(r"[^a-z0-9_.-]", "-", task_dir.name.lower())
    tag = f"openenv/task-{name}:{_folder_digest(env_dir)}"
    if _has_image(client, tag):
        return tag
    progress(f"building task image {tag} from {dockerfile}")
    return _build(
        client,
        context=env_dir,
        dockerfile=dockerfile,
        tag=tag,
        network=network,
        buildargs={k: str(v) for k, v in (buildargs or {}).items()},
        labels={"openenv.task": task_dir.name},
        progress=progress,
    )


def parse_substitutes(pairs: list[str] | str | None) -> dict[str, str]:
    """`["python:3.11-slim=openenv/base:latest", ...]` (or one comma-separated string, as in
    `$OPENENV_IMAGE_SUBSTITUTES`) -> {missing image: image to use instead}; `*=IMAGE` stands in for any
    image that is missing (a folder of tasks with assorted FROM lines).

    Raises:
        EnvError: an entry is not `FROM=TO`.
    """
    items = pairs.split(",") if isinstance(pairs, str) else list(pairs or [])
    out = {}
    for item in (i.strip() for i in items):
        if not item:
            continue
        missing, sep, instead = item.partition("=")
        if not sep or not missing or not instead:
            raise EnvError(
                f"an image substitution is FROM=TO (e.g. python:3.11-slim={OFFLINE_BASE}), got {item!r}"
            )
        out[missing.strip()] = instead.strip()
    return out


def _resolve(
    client: docker.DockerClient,
    image: str,
    substitutes: dict[str, str],
    task: Task,
    notes: list[str],
    policy: PullPolicy,
    progress: Progress,
) -> str:
    """`image` if the engine has it; else its explicit substitute; else `image` pulled under `policy`."""
    instead = substitutes.get(image, substitutes.get("*"))  # `*=IMAGE`: any missing image
    if instead is None and image in (OFFLINE_BASE, PYTHON_IMAGE) and not _has_image(client, image):
        raise EnvError(
            f"task {task.id!r} needs {image}, which is built on this machine, not pulled: {base_image_hint()}"
        )
    if instead is not None and not _has_image(client, image):
        if not _has_image(client, instead):
            raise EnvError(f"the substitute {instead!r} for {image!r} is not in the Docker engine either")
        notes.append(f"image {image} substituted by {instead}")
        return instead
    offline = (
        f"substitute an image you have: --image-substitute {image}={OFFLINE_BASE} (or "
        f"OPENENV_IMAGE_SUBSTITUTES={image}={OFFLINE_BASE}; for {OFFLINE_BASE}: {base_image_hint()})",
    )
    try:
        note = ensure_image(client, image, policy=policy, progress=progress, offline_ways=offline)
    except EnvError as exc:
        raise EnvError(f"task {task.id!r}: {exc.message}", image=image) from exc
    if note:
        notes.append(note)
    return image


def task_image(
    client: docker.DockerClient,
    task: Task,
    substitutes: dict[str, str] | None = None,
    progress: Progress = print,
    *,
    pull: PullPolicy | None = None,
) -> tuple[str, bool, list[str]]:
    """The image a task's episodes run in: (tag, whether its workdir holds the starting files, notes).

    `[environment].docker_image` is used as it is, pulled when missing; a Dockerfile that only copies
    files into the workdir runs as its FROM image (the copied files are the task's workspace, written by
    the sandbox); any other Dockerfile is built, with `environment/` as the context and its FROM image
    pulled or substituted per `substitutes`. Pulls and substitutions are reported in the notes. Tasks of
    no image use the offline base.

    Args:
        pull: when to pull a missing image (`missing`, `always`, `never`); None: `$OPENENV_PULL`, else
            `missing`.

    Raises:
        EnvError: an image is missing and cannot be pulled (the message names it, the registry's answer
            and the ways out), or the build failed.
    """
    substitutes = {**parse_substitutes(os.environ.get("OPENENV_IMAGE_SUBSTITUTES")), **(substitutes or {})}
    policy = pull_policy(pull)
    notes: list[str] = []
    if task.image:
        return _resolve(client, task.image, substitutes, task, notes, policy, progress), True, notes
    if not task.needs_build() or task.environment_dir is None:
        image = task.base_image or OFFLINE_BASE
        return _resolve(client, image, substitutes, task, notes, policy, progress), False, notes
    base = (
        _resolve(client, task.base_image, substitutes, task, notes, policy, progress)
        if task.base_image
        else None
    )
    return _build_substituted(client, task, base, progress), True, notes


def _build_substituted(client: docker.DockerClient, task: Task, base: str | None, progress: Progress) -> str:
    """Build `environment/` with its first FROM replaced by `base`, in a copy of the context."""
    env_dir = Path(task.environment_dir or "")
    name = re.sub(r"[^a-z0-9_.-]", "-", task.id.lower())
    digest = hashlib.sha256(f"{_folder_digest(env_dir)}:{base}".encode()).hexdigest()[:16]
    tag = f"openenv/task-{name}:{digest}"
    if _has_image(client, tag):
        return tag
    with tempfile.TemporaryDirectory(prefix="openenv-build-") as tmp:
        context = Path(tmp) / "context"
        shutil.copytree(env_dir, context, symlinks=False)
        dockerfile = context / "Dockerfile"
        if base is not None and base != task.base_image:
            lines, done = [], False
            for line in dockerfile.read_text().splitlines():
                if not done and line.strip().upper().startswith("FROM "):
                    words = line.split()
                    index = next(i for i, w in enumerate(words[1:], 1) if not w.startswith("--"))
                    words[index] = base
                    line, done = " ".join(words), True
                lines.append(line)
            dockerfile.write_text("\n".join(lines) + "\n")
        progress(f"building task image {tag} from {env_dir}/Dockerfile" + (f" (FROM {base})" if base else ""))
        return _build(
            client,
            context=context,
            dockerfile=dockerfile,
            tag=tag,
            network="none",
            buildargs={},
            labels={"openenv.task": task.id},
            progress=progress,
        )


def extract_workdir(client: docker.DockerClient, image: str, workdir: str, dest: Path) -> int:
    """Copy `workdir` out of `image` into the host folder `dest` (no container is started), modes kept.

    Only regular files and folders come out: links, devices and paths leaving the folder are skipped,
    since these files are written on the host. Returns how many files were written.
    """
    try:
        labels = {
            "openenv.extract": "workdir",
            **sweeper.sandbox_labels(),
        }  # swept should this process die here
        container = client.containers.create(image, ["true"], labels=labels)
    except docker.errors.DockerException as exc:
        raise EnvError(f"could not read {workdir} from {image}: {exc}") from exc
    try:
        stream, _ = container.get_archive(workdir)
        data = io.BytesIO(b"".join(stream))
    except docker.errors.NotFound:
        return 0
    finally:
        container.remove(force=True)
    written = 0
    with tarfile.open(fileobj=data) as archive:
        for member in archive.getmembers():
            parts = PurePosixPath(member.name).parts[1:]  # the archive's root is the folder itself
            if not parts or ".." in parts or not (member.isfile() or member.isdir()):
                continue
            target = dest.joinpath(*parts)
            if member.isdir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            handle = archive.extractfile(member)
            if handle is None:
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(handle.read())
            target.chmod(0o755 if member.mode & 0o111 else 0o644)
            written += 1
    return written


PYTHON_IMAGE = "openenv/python:3.11"


def build_python_image(
    client: docker.DockerClient, *, base: str = OFFLINE_BASE, progress: Progress = print
) -> str:
    """`openenv/python:3.11`: the offline base plus `pip` (this interpreter's own, copied in; pip vendors
    its dependencies), without Debian's externally-managed marker, so it stands in for
    `python:3.11-slim` in task Dockerfiles that `RUN pip install --no-index` from wheels in their
    context. Built once (no network, no pull); returns the tag.

    Raises:
        EnvError: the base image is missing or the build failed.
    """
    import importlib.util

    if _has_image(client, PYTHON_IMAGE):
        return PYTHON_IMAGE
    if not _has_image(client, base):
        raise EnvError(f"{base} is not built; {base_image_hint()}")
    spec = importlib.util.find_spec("pip")
    if spec is None or spec.origin is None:
        raise EnvError("pip is not installed in this Python; it is copied into the image")
    with tempfile.TemporaryDirectory(prefix="openenv-python-image-") as tmp:
        context = Path(tmp)
        shutil.copytree(
            Path(spec.origin).parent, context / "pip", ignore=shutil.ignore_patterns("__pycache__")
        )
        (context / "Dockerfile").write_text(
            f"FROM {base}\n"
            "USER root\n"
            "COPY pip /usr/local/lib/python3.11/dist-packages/pip\n"
            "RUN rm -f /usr/lib/python3*/EXTERNALLY-MANAGED"
            " && printf '#!/bin/sh\\nexec python3 -m pip \"$@\"\\n' > /usr/local/bin/pip"
            " && chmod 755 /usr/local/bin/pip && ln -sf pip /usr/local/bin/pip3 && pip --version\n"
        )
        progress(f"building {PYTHON_IMAGE} from {base} with this interpreter's pip")
        return _build(
            client,
            context=context,
            dockerfile=context / "Dockerfile",
            tag=PYTHON_IMAGE,
            network="none",
            buildargs={},
            labels={"openenv.image": "python"},
            progress=progress,
        )
