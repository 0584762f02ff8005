"""An episode's local sandbox over its task's own image, with no Docker daemon needed to run it.

`[environment].docker_image` is fetched and unpacked once per digest (`rootfs.RootfsCache`); every episode
leases the root, binds it read-only as its system (`LocalSandbox(image=...)`), and starts from a copy of
the image's workdir. A task whose Dockerfile must be built (RUN steps, files outside the workdir) is built
by a Docker daemon where one answers and unpacked from it the same way; where none does it is refused
with the reason, since only a build reproduces it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from openenv.errors import BadRequest
from openenv.harness.sandbox.local import LocalSandbox
from openenv.harness.sandbox.rootfs import ImageRoot, RootfsCache, copy_workdir
from openenv.harness.tasks.model import Task

__all__ = ["image_root_for", "local_image_factory", "stderr_progress"]


def stderr_progress(line: str) -> None:
    """Long work (a fetch, an unpack) said on stderr, so a `--json` stdout stays one object."""
    print(f"[openenv] {line}", file=sys.stderr, flush=True)


def image_root_for(
    task: Task,
    cache: RootfsCache,
    *,
    substitutes: dict[str, str] | None = None,
    notes: list[str] | None = None,
) -> ImageRoot:
    """The unpacked root a task's episodes run in: its `docker_image`, or its Dockerfile built by the
    Docker daemon when one answers.

    Raises:
        BadRequest: the task needs a build and no daemon answers here (the reason is in the message).
        EnvError: the fetch, build or unpack failed.
    """
    if task.image:
        return cache.get(task.image)
    from openenv.harness.sandbox.docker_engine import engine_available

    what = "; ".join(task.build_steps[:2] + [f"files outside {task.workdir}"] * bool(task.outside_files))
    if (reason := engine_available()) is not None:
        raise BadRequest(
            f"task {task.id!r} needs an image build ({what}), which needs a Docker daemon, and {reason}. Build "
            "and push its image where a daemon exists and name it in task.toml [environment].docker_image "
            "(the local sandbox then fetches it without a daemon), or run it with --sandbox docker there"
        )
    import docker

    from openenv.harness.sandbox.images import task_image

    client = docker.from_env()
    try:
        tag, _, said = task_image(client, task, substitutes or {})
        image_id = client.images.get(tag).id
    finally:
        client.close()
    if notes is not None:
        notes.extend(said + [f"built {tag} with the Docker daemon; run from its unpacked root"])
    return cache.import_from(f"docker-daemon:{tag}", image_id, tag)


def local_image_factory(
    task: Task,
    *,
    cache: RootfsCache | None = None,
    substitutes: dict[str, str] | None = None,
    notes: list[str] | None = None,
    **options: Any,
) -> Callable[[tuple[int, ...]], LocalSandbox]:
    """A sandbox factory (`EpisodeHooks(sandbox_factory=...)`) whose episodes run in `task`'s image.

    The image is resolved once, here (so a bad reference fails before any episode starts); each
    sandbox holds a lease on the root until it closes, and starts from the image's workdir.
    """
    cache = cache or RootfsCache(progress=stderr_progress)
    root = image_root_for(task, cache, substitutes=substitutes, notes=notes)

    def make(ports: tuple[int, ...]) -> LocalSandbox:
        lease = cache.hold(root)
        try:
            box = _LeasedSandbox(forward_ports=ports, workdir=task.workdir, image=root, **options)
        except BaseException:
            lease.unlink(missing_ok=True)
            raise
        box.lease = lease
        try:
            copy_workdir(root, task.workdir, box.workspace)
            box.hand_over(box.workspace)
            box.workspace_ready = True  # the image's workdir (a built image's COPY steps included)
        except BaseException:
            box.close()
            raise
        return box

    return make


class _LeasedSandbox(LocalSandbox):
    """A local sandbox that releases its image lease when it closes."""

    lease: Path | None = None
    workspace_ready = False

    def close(self) -> None:
        try:
            super().close()
        finally:
            if self.lease is not None:
                Path(self.lease).unlink(missing_ok=True)
                self.lease = None
