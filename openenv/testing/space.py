"""Build a pushed Space's image as the tests need it: offline, labelled for the leftover sweep.

Two suites build a Space folder that `openenv push` wrote (ours: tests/test_space.py; the reference's
`AutoEnv` road: tests/interop/test_reference_autoenv_space.py). The Hub builds it online from public base
images; here the build runs with no network, each public `FROM` replaced by the local image that stands in
for it (`build_args`), so what is tested is the Dockerfile we push, not a copy of it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from openenv.harness.env_image import build_args

__all__ = ["build_space_image"]


def build_space_image(
    folder: Path, tag: str, *, substitutes: dict[str, str], labels: dict[str, str], expect_args: list[str]
) -> str:
    """Build `folder`'s Dockerfile as `tag`, offline; fail the test with the build log's tail.

    `expect_args` names the build arguments the Dockerfile must take (one per public base image): a
    Dockerfile that grew a `FROM` we do not stand in for would otherwise be pulled from outside."""
    import docker
    import docker.errors

    args, said = build_args((folder / "Dockerfile").read_text(), substitutes)
    assert sorted(args) == sorted(expect_args), f"the Space's build arguments changed: {sorted(args)}"
    for line in said:
        print(f"[space] {line}")
    try:
        docker.from_env().images.build(
            path=str(folder),
            tag=tag,
            buildargs=args,
            network_mode="none",
            rm=True,
            forcerm=True,
            labels=labels,
        )
    except docker.errors.BuildError as exc:
        log = "".join(str(line.get("stream", line.get("error", ""))) for line in exc.build_log)
        pytest.fail(f"building the Space failed: {exc.msg}\n{log[-3000:]}")
    return tag
