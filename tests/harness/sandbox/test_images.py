"""Sandbox images on a real engine: Harbor task images (built offline, once) and harness images."""

from __future__ import annotations

from pathlib import Path

import docker
import pytest

from openenv.errors import EnvError
from openenv.harness.sandbox.docker import DEFAULT_IMAGE, DockerSandbox


def _task_dir(tmp_path: Path, dockerfile: str) -> Path:
    (tmp_path / "environment").mkdir(parents=True)
    (tmp_path / "environment" / "Dockerfile").write_text(dockerfile)
    return tmp_path


def test_a_harbor_task_image_is_built_once_offline_and_episodes_run_in_it(
    client: docker.DockerClient, tmp_path: Path
) -> None:
    from openenv.harness.sandbox.images import build_task_image

    task_dir = _task_dir(
        tmp_path / "hello-task",
        f"FROM {DEFAULT_IMAGE}\nRUN mkdir -p /opt/task && echo from-the-task-image > /opt/task/marker\n",
    )
    lines: list[str] = []
    tag = build_task_image(client, task_dir, progress=lines.append)
    try:
        assert tag is not None and tag.startswith("openenv/task-hello-task:")
        assert any(line.startswith("Successfully built") for line in lines)
        lines.clear()
        assert build_task_image(client, task_dir, progress=lines.append) == tag
        assert lines == []  # cached by the environment folder's digest
        with DockerSandbox(image=tag, client=client) as box:
            assert box.run(["cat", "/opt/task/marker"]).output == "from-the-task-image\n"
    finally:
        if tag:
            client.images.remove(tag, force=True)
    assert build_task_image(client, tmp_path) is None  # no environment/Dockerfile: the default image


def test_image_builds_have_no_network(client: docker.DockerClient, tmp_path: Path) -> None:
    from openenv.harness.sandbox.images import build_task_image

    probe = "import socket; socket.create_connection(('1.1.1.1', 80), timeout=3)"
    task_dir = _task_dir(tmp_path / "needs-net", f'FROM {DEFAULT_IMAGE}\nRUN python3 -c "{probe}"\n')
    with pytest.raises(EnvError, match="Network is unreachable|returned a non-zero code"):
        build_task_image(client, task_dir)


@pytest.mark.slow
def test_openenv_build_makes_a_harness_image_that_runs_with_no_mounts(client: docker.DockerClient) -> None:
    from openenv.harness.catalog import get_spec
    from openenv.harness.install import install_status
    from openenv.harness.sandbox.images import build_harness_image

    spec = get_spec("gemini-cli")  # the smallest npm install
    if not install_status(spec).ready:
        pytest.skip("gemini-cli is not installed; run scripts/install_harnesses.sh gemini-cli")
    tag = build_harness_image(client, spec, progress=lambda line: None)
    with DockerSandbox(image=tag, client=client) as box:
        result = box.run(["gemini", "--version"], env={"PATH": "/usr/local/bin:/usr/bin:/bin"}, timeout_s=60)
    assert result.output.strip().splitlines()[-1] == spec.install.version, result.output
