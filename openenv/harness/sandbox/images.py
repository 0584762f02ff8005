"""Sandbox images: a harness's `envs/<name>/Dockerfile` and a Harbor task's `environment/Dockerfile`.

Builds never pull and run with no network by default: the offline base (scripts/build_base_image.sh)
or any image already in the engine is the starting point. A task image is tagged by a hash of its
`environment/` folder, so an unchanged task is built once.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import docker
import docker.errors

from openenv.errors import EnvError
from openenv.harness.catalog import harness_dir
from openenv.harness.install import install, install_status, prefix
from openenv.harness.spec import HarnessSpec

__all__ = ["OFFLINE_BASE", "build_harness_image", "build_task_image", "harness_image_tag"]

OFFLINE_BASE = os.environ.get("OPENENV_BASE_IMAGE", "openenv/base:latest")
Progress = Callable[[str], None]


def harness_image_tag(spec: HarnessSpec) -> str:
    """`openenv/<harness>:<pinned version>`: the image `openenv build` makes for a harness."""
    return f"openenv/{spec.name}:{re.sub(r'[^A-Za-z0-9_.-]', '-', spec.install.version)}"


def _has_image(client: docker.DockerClient, tag: str) -> bool:
    try:
        client.images.get(tag)
        return True
    except docker.errors.ImageNotFound:
        return False


def _build(client: docker.DockerClient, *, context: Path, dockerfile: Path, tag: str, network: str,
           buildargs: dict[str, str], labels: dict[str, str], progress: Progress) -> str:
    """Run one classic-builder build, streaming its `Step` lines to `progress`."""
    try:
        stream = client.api.build(path=str(context), dockerfile=str(dockerfile), tag=tag, rm=True, forcerm=True,
                                  decode=True, network_mode=network, pull=False, buildargs=buildargs,
                                  labels=labels)
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
    client: docker.DockerClient, spec: HarnessSpec, *, base: str | None = None, network: str = "none",
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
    return _build(client, context=context, dockerfile=dockerfile, tag=tag, network=network,
                  buildargs={"BASE_IMAGE": base} if base else {},
                  labels={"openenv.harness": spec.name}, progress=progress)


def _folder_digest(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest.update(path.relative_to(folder).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def build_task_image(
    client: docker.DockerClient, task_dir: Path, *, network: str = "none", progress: Progress = print,
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
    return _build(client, context=env_dir, dockerfile=dockerfile, tag=tag, network=network,
                  buildargs={k: str(v) for k, v in (buildargs or {}).items()},
                  labels={"openenv.task": task_dir.name}, progress=progress)
