"""The loopback registry is a real registry: the Docker engine pushes to it and pulls from it, it counts
what reached it, and one that asks for a login refuses a pull without one."""

from __future__ import annotations

import io
import tarfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from openenv.testing.registry import LoopbackRegistry

docker = pytest.importorskip("docker")


@pytest.fixture(scope="module")
def engine() -> Iterator[Any]:
    from openenv.harness.sandbox.docker import engine_available

    reason = engine_available()
    if reason is not None:
        pytest.skip(reason)
    client = docker.from_env()
    yield client
    client.close()


def _one_file_image(client: Any, tag: str) -> str:
    """A tiny image made here (one file, no base): `docker import` of a tarball."""
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w") as archive:
        body = tag.encode()
        info = tarfile.TarInfo("hello.txt")
        info.size = len(body)
        archive.addfile(info, io.BytesIO(body))
    repository, _, version = tag.rpartition(":")
    client.api.import_image_from_data(data.getvalue(), repository=repository, tag=version)
    return tag


def test_a_pushed_image_removed_locally_is_pulled_back_from_loopback(
    engine: Any, loopback_registry: Any
) -> None:
    name = f"openenv-test/registry-{uuid.uuid4().hex[:8]}"
    local = _one_file_image(engine, f"{name}:1")
    reference = loopback_registry.push(local, f"{name}:1")
    assert reference == f"{loopback_registry.host}/{name}:1"
    assert loopback_registry.host.startswith("127.0.0.1:")
    digest = loopback_registry.digest(f"{name}:1")
    engine.images.remove(reference)
    engine.images.remove(local)
    before = loopback_registry.requests("GET", f"/v2/{name}/manifests/")
    try:
        pulled = engine.images.pull(f"{loopback_registry.host}/{name}", tag="1")
        assert f"{loopback_registry.host}/{name}@{digest}" in pulled.attrs["RepoDigests"]
        assert loopback_registry.requests("GET", f"/v2/{name}/manifests/") == before + 1
    finally:
        engine.images.remove(reference, force=True)


def test_a_registry_with_a_login_refuses_an_anonymous_pull(engine: Any, tmp_path: Path) -> None:
    name = f"openenv-test/private-{uuid.uuid4().hex[:8]}"
    local = _one_file_image(engine, f"{name}:1")
    with LoopbackRegistry(tmp_path / "registry", login=("alice", "s3cret")) as registry:
        reference = registry.push(local, f"{name}:1")
        engine.images.remove(reference)
        anonymous = docker.from_env()
        with pytest.raises(docker.errors.APIError, match="no basic auth credentials|unauthorized"):
            anonymous.images.pull(reference)
        anonymous.close()
    engine.images.remove(local)
