"""An episode's Docker sandbox: made for its task (image, harness mounts, user) by `sandbox_factory`, and,
for Harbor's separate verifier mode, graded in a fresh container by `verify_isolated`.

The image is resolved by `images.task_image` (the task's `docker_image`, its Dockerfile built, or its
FROM image after substitutes); the container itself is `docker.DockerSandbox`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import docker

from openenv.harness.sandbox.docker import DockerSandbox
from openenv.harness.sandbox.files import copy_plain
from openenv.harness.sandbox.pull_policy import PullPolicy
from openenv.harness.tasks.model import Task
from openenv.harness.verifier import RewardRule, Verdict, verify
from openenv.settings import flag

__all__ = ["sandbox_factory", "verify_isolated"]


def verify_isolated(
    sandbox: DockerSandbox, task: Task, *, tool_calls: int = 0, rule: RewardRule | None = None
) -> Verdict:
    """Grade a copy of the post-episode workspace in a fresh container.

    The episode container is removed first, so nothing the agent left running can touch the grading,
    and the hidden tests only ever exist in the grader's container.
    """
    sandbox.stop()
    with sandbox.fresh(expose_private=True) as grader:
        copy_plain(sandbox.workspace, grader.workspace)
        return verify(grader, task, tool_calls=tool_calls, rule=rule)


def _to_stderr(line: str) -> None:
    """Pull and build progress: on stderr, so a command's `--json` stdout stays one object."""
    print(line, file=sys.stderr, flush=True)


def sandbox_factory(
    task: Task | None = None,
    *,
    substitutes: dict[str, str] | None = None,
    notes: list[str] | None = None,
    pull: PullPolicy | None = None,
    **options: Any,
) -> Callable[[tuple[int, ...]], DockerSandbox]:
    """An `EpisodeHooks(sandbox_factory=...)` that runs every episode in its own DockerSandbox.

    The host's pinned harness installs (`.cache/harnesses`, Node 22 included) are mounted read-only at
    the same path, so the offline base image runs any npm harness with no per-harness build. With a
    `task`, the image is the task's (`task_image`: its `docker_image`, its Dockerfile built, or its
    FROM image, after `substitutes`; a missing one pulled under `pull`, see `pull.py`), the workspace is
    mounted at its workdir, and a built image's workdir contents become the starting workspace. What was
    pulled or substituted is appended to `notes`.

    By default the agent and the tests run as uid 61001 (DOCKER_UID) on a read-only root filesystem (only the workdir,
    /tmp, HOME and Harbor's folders are writable). Harbor runs them as root on a writable one; with
    `OPENENV_DOCKER_HARBOR_ROOT=1` so do we (every capability still dropped, no network), for tasks that
    must write elsewhere (/etc, /usr, /data). That also lets the agent change the image's Python in
    shared mode, which the tests then run: prefer `environment_mode = "separate"` for such tasks.
    """
    from openenv.harness.install import cache_root
    from openenv.harness.sandbox.images import extract_workdir, task_image

    mounts = (cache_root(), *options.pop("mounts", ()))
    if task is None:
        return lambda ports: DockerSandbox(forward_ports=ports, mounts=mounts, **options)
    client = options.get("client") or docker.from_env()
    options["client"] = client
    image, built, said = task_image(client, task, substitutes or {}, _to_stderr, pull=pull)
    if flag(
        "OPENENV_DOCKER_HARBOR_ROOT"
    ):  # Harbor's own defaults, by explicit opt-in (`true` too, not only `1`)
        options.setdefault("user", None)
        options.setdefault("read_only", False)
        said.append("Docker sandbox as root on a writable root filesystem (OPENENV_DOCKER_HARBOR_ROOT=1)")
    if notes is not None:
        notes.extend(said)
    options.setdefault("image", image)

    def make(ports: tuple[int, ...]) -> DockerSandbox:
        box = DockerSandbox(forward_ports=ports, mounts=mounts, workdir=task.workdir, **options)
        if built:  # the image's workdir, as its build left it (RUN steps included), is the workspace
            try:
                extract_workdir(client, image, task.workdir, box.workspace)
                box.hand_over(box.workspace)
                box.workspace_ready = True
            except BaseException:
                box.close()
                raise
        return box

    return make
