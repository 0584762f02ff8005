"""ContainerSandbox outside a container: refused unless the caller opts in, and refused with the missing
Harbor links named. Its real run (uid 1000, no capability, default seccomp, read-only root) is the Space
test: tests/test_space.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from openenv.errors import EnvError
from openenv.harness.sandbox import container
from openenv.harness.sandbox.container import OUTSIDE_ENV, ContainerSandbox, container_evidence


@pytest.fixture
def no_container(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A machine with none of the signs of a container (this test machine may well be one)."""
    monkeypatch.setattr(container, "_EVIDENCE_FILES", (str(tmp_path / "no-marker"),))
    (tmp_path / "cgroup").write_text("0::/init.scope\n")
    monkeypatch.setattr(container, "_PID1_CGROUP", str(tmp_path / "cgroup"))
    monkeypatch.delenv(OUTSIDE_ENV, raising=False)


def test_the_signs_of_a_container_are_read(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, no_container: None
):
    assert container_evidence() is None
    (tmp_path / "cgroup").write_text("12:pids:/kubepods/besteffort/pod1\n")
    assert container_evidence() == f"{tmp_path / 'cgroup'} (kubepods)"
    (tmp_path / "no-marker").touch()
    assert container_evidence() == str(tmp_path / "no-marker")


def test_outside_a_container_it_is_refused_and_the_error_names_the_opt_in(no_container: None) -> None:
    with pytest.raises(EnvError, match=f"none is detected here.*opt in with {OUTSIDE_ENV}=1") as err:
        ContainerSandbox()
    assert "allow_outside_container=True" in str(err.value)


def test_opted_in_without_the_harbor_links_it_names_them(
    no_container: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("OPENENV_CONTAINER_HARBOR", str(tmp_path / "harbor"))
    monkeypatch.setenv(OUTSIDE_ENV, "1")  # the opt-in passes the container check ...
    with pytest.raises(EnvError, match=r"needs /app, /tests, /solution, /logs linked into .*harbor"):
        ContainerSandbox()  # ... but without the image's links there are no Harbor paths to grade in
    assert not (tmp_path / "harbor").exists()  # nothing made, nothing locked


def test_a_task_with_another_workdir_is_sent_to_the_docker_sandbox(no_container: None) -> None:
    with pytest.raises(EnvError, match="workdir /app only.*'/workspace'.*Docker sandbox"):
        ContainerSandbox(workdir="/workspace", allow_outside_container=True)


def test_the_harness_env_builds_it_from_openenv_sandbox_isolation(
    no_container: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`OPENENV_SANDBOX_ISOLATION=container` (the Space's Dockerfile sets it) reaches ContainerSandbox, whose
    refusal outside a container is what comes back."""
    from openenv.harness.environment import HarnessEnvironment

    monkeypatch.setenv("OPENENV_SANDBOX_ISOLATION", "container")
    env = HarnessEnvironment("pi")
    with pytest.raises(EnvError, match="the container sandbox runs the harness with no boundary"):
        env._local_sandbox((), "/app")
