"""Start a harness in a sandbox: write its config under the episode's HOME, run setup, start the CLI."""

from __future__ import annotations

import os

from openenv.errors import EnvError
from openenv.harness.install import docker_blocker, install_status, node_bin_dir, prefix
from openenv.harness.sandbox.base import HarnessProcess, Sandbox
from openenv.harness.spec import HarnessSpec, SessionContext

__all__ = ["harness_path", "launch"]


def harness_path(spec: HarnessSpec) -> str:
    """PATH for the harness: its install prefix, then Node 22 where it needs it, then the system's."""
    parts = [str(prefix(spec) / "bin")]
    node = node_bin_dir(spec)
    if node is not None:
        parts.append(str(node))
    return os.pathsep.join([*parts, os.environ.get("PATH", "/usr/bin:/bin")])


def launch(
    spec: HarnessSpec,
    sandbox: Sandbox,
    ctx: SessionContext,
    *,
    timeout_s: float,
    task_env: dict[str, str] | None = None,
) -> HarnessProcess:
    """Configure and start `spec`'s harness headless on `ctx.instruction`.

    `task_env` (the task's Dockerfile ENV and [environment].env) is set under the harness's own
    variables, so the agent's commands see what they would see in the task's image.

    Raises:
        EnvError: the pinned harness is not installed (the message says how to install it), its install
            cannot run in this Docker sandbox (`install.docker_blocker`: the reason and the fix), or a
            setup command failed.
    """
    status = install_status(spec)
    if not status.ready:
        raise EnvError(
            f"harness {spec.name} {spec.install.version} is not installed (found {status.installed}); "
            f"run `openenv harness install {spec.name}`"
        )
    if getattr(sandbox, "kind", "local") == "docker" and (reason := docker_blocker(spec)) is not None:
        raise EnvError(f"harness {spec.name} cannot run in the Docker sandbox: {reason}")
    spec.write_config(ctx)
    env = {**(task_env or {}), **spec.environment(ctx), "PATH": harness_path(spec)}
    for argv in spec.setup_argvs(ctx):
        result = sandbox.run(argv, env=env, timeout_s=60)
        if result.exit_code != 0:
            raise EnvError(f"{spec.name} setup `{argv[0]} {argv[1]}` failed: {result.output[-800:]}")
    return sandbox.start(spec.argv(ctx), env=env, timeout_s=timeout_s)
