"""The reference OpenEnv's `AutoEnv.from_env("owner/name")` on a Space that `openenv push` wrote.

The Hub is the one stand-in, in two places, both in the reference's process:

- the Space's git repository: `openenv push --public --dry-run` writes the folder, `git init` + commit make it
  the repository the Hub would hold. The reference runs its own `pip install
  git+https://huggingface.co/spaces/openenv-test/echo-space`, unchanged; git's `url.<local>.insteadOf` (a
  `GIT_CONFIG_GLOBAL` of the test's) answers that URL from the local repository, and every other
  `http(s)://` URL from a path that does not exist, so git can reach nothing else;
- the Space's host: the reference builds `https://openenv-test-echo-space.hf.space` in
  `AutoEnv._resolve_space_url`, the only function patched: it records what the reference built and returns
  the loopback URL of the served image instead.

The Space's image is built from the pushed folder's own Dockerfile (its public base substituted by the
offline `openenv/python`, printed) and run as Spaces run it: `--user 1000 --cap-drop ALL`, the default
seccomp profile, a read-only root with /tmp writable, the port published on 127.0.0.1 only. pip installs
with `--no-index` (its build backend, setuptools, from that image's wheelhouse), and an HTTP(S) proxy on a
dead loopback port catches any request the reference would send off this machine.
"""

from __future__ import annotations

import io
import os
import secrets
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from openenv.core.net import free_port, wait_for_health
from openenv.errors import TransportError
from openenv.harness.sandbox.docker import engine_available
from openenv.space_package import space_package
from openenv.testing.space import build_space_image
from tests.interop.conftest import Reference

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
SPACE_ID = "openenv-test/echo-space"
PACKAGE = space_package(SPACE_ID, "echo")
TAG = "openenv-test/space-echo:cached"
LABELS = {"openenv.test": "space-echo"}
PYTHON_IMAGE = (
    os.environ.get("OPENENV_PYTHON_IMAGE") or "openenv/python:latest"
)  # what build_python_image.sh builds
OFFLINE = {"python:3.11-slim": PYTHON_IMAGE}


def _git(*args: str, cwd: Path) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=openenv push", "-c", "user.email=push@openenv.invalid", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


@pytest.fixture(scope="module")
def space_repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The pushed Space as the Hub holds it: a git repository; yields (folder, commit)."""
    folder = tmp_path_factory.mktemp("hub") / "echo-space"
    made = subprocess.run(
        [
            sys.executable,
            "-m",
            "openenv.cli.main",
            "push",
            "echo",
            "--repo",
            SPACE_ID,
            "--public",
            "--dry-run",
            "--out",
            str(folder),
        ],
        check=False,
        capture_output=True,
        text=True,
    )
    assert made.returncode == 0, made.stderr
    _git("init", "-q", "-b", "main", cwd=folder)
    _git("add", "-A", cwd=folder)
    _git("commit", "-q", "-m", "openenv push", cwd=folder)
    return folder, _git("rev-parse", "HEAD", cwd=folder)


@pytest.fixture(scope="module")
def space_image(space_repo: tuple[Path, str]) -> str:
    if (reason := engine_available()) is not None:
        pytest.skip(f"{reason}; run scripts/install.sh --all")
    subprocess.run(["bash", str(REPO / "scripts" / "build_python_image.sh")], check=True)
    folder, _ = space_repo
    return build_space_image(folder, TAG, substitutes=OFFLINE, labels=LABELS, expect_args=["BASE_IMAGE"])


def _run_as_spaces_do(image: str, **kwargs: object) -> dict[str, object]:
    return dict(
        image=image,
        user="1000",
        cap_drop=["ALL"],
        read_only=True,
        labels=LABELS,
        tmpfs={"/tmp": "rw,exec,mode=1777"},
        **kwargs,
    )


@pytest.fixture(scope="module")
def served_space(space_image: str) -> Iterator[tuple[str, str]]:
    """The Space's container with its OPENENV_TOKEN secret set; yields (loopback URL, token)."""
    import docker

    client = docker.from_env()
    port, token = free_port(), secrets.token_urlsafe(24)
    container = client.containers.run(
        **_run_as_spaces_do(
            space_image,
            detach=True,
            remove=True,
            ports={"7860/tcp": ("127.0.0.1", port)},
            environment={"OPENENV_TOKEN": token},
        )
    )
    url = f"http://127.0.0.1:{port}"
    try:
        host = client.api.inspect_container(container.id)["HostConfig"]
        assert (
            host["CapDrop"] == ["ALL"] and not host["CapAdd"] and not host["SecurityOpt"]
        )  # default seccomp
        assert host["ReadonlyRootfs"] and not host["Privileged"]
        assert host["PortBindings"] == {"7860/tcp": [{"HostIp": "127.0.0.1", "HostPort": str(port)}]}

        def gone() -> str | None:
            container.reload()
            return (
                None if container.status in ("created", "running") else f"the container is {container.status}"
            )

        try:
            wait_for_health(url, timeout_s=60, gone=gone, interval_s=0.2)
        except TransportError as exc:
            pytest.fail(f"{exc}\n{container.logs(tail=30).decode(errors='replace')}")
        yield url, token
        logs = container.logs().decode(errors="replace")
        assert "serving" in logs and token not in logs  # the secret stays out of the Space's (public) log
    finally:
        container.stop(timeout=3)


@pytest.fixture
def hub_git(space_repo: tuple[Path, str], space_image: str, tmp_path: Path) -> dict[str, str]:
    """The environment of the reference's process: git answers the Space's Hub URL from the local
    repository and no other; pip uses no index (the build backend, setuptools, comes from the offline
    image's wheelhouse); any HTTP(S) request that is not loopback hits a dead proxy."""
    import docker

    folder, _ = space_repo
    config = tmp_path / "gitconfig"
    config.write_text(
        f'[url "file://{folder}"]\n\tinsteadOf = https://huggingface.co/spaces/{SPACE_ID}\n'
        f'[url "file://{tmp_path}/no-such-remote/"]\n\tinsteadOf = https://\n\tinsteadOf = http://\n'
    )
    wheels = tmp_path / "wheels"
    engine = docker.from_env()
    [name] = (
        engine.containers.run(
            PYTHON_IMAGE,
            ["sh", "-c", "cd /opt/wheels && ls setuptools-*.whl"],
            remove=True,
            network_mode="none",
        )
        .decode()
        .split()
    )
    holder = engine.containers.create(PYTHON_IMAGE, network_mode="none")
    try:  # an archive, not the log: a container's log is text and would mangle the wheel's bytes
        with tarfile.open(fileobj=io.BytesIO(b"".join(holder.get_archive(f"/opt/wheels/{name}")[0]))) as tar:
            tar.extractall(wheels, filter="data")
    finally:
        holder.remove(force=True)
    dead = f"http://127.0.0.1:{free_port()}"
    return {
        "GIT_CONFIG_GLOBAL": str(config),
        "GIT_CONFIG_NOSYSTEM": "1",
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": str(wheels),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "HTTP_PROXY": dead,
        "HTTPS_PROXY": dead,
        "http_proxy": dead,
        "https_proxy": dead,
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
        "PATH": "/usr/bin:/bin",
    }  # git; and the reference's pip rather than a `uv` it would prefer on PATH


@pytest.fixture
def clean_reference(reference: Reference) -> Iterator[Reference]:
    """The reference's venv without the Space's client package, before and after (it is shared)."""
    uninstall = [str(reference.python), "-I", "-m", "pip", "uninstall", "-q", "-y", PACKAGE.distribution]
    subprocess.run(uninstall, cwd=reference.workdir, check=False, capture_output=True)
    yield reference
    subprocess.run(uninstall, cwd=reference.workdir, check=False, capture_output=True)


_FROM_ENV = """
import importlib.metadata, inspect, json, os
from openenv import AutoEnv
from openenv.auto import auto_env

built = []
hub_rule = auto_env.AutoEnv._resolve_space_url.__func__
def resolve(cls, repo_id):  # the one patch: the Space's host is our container on loopback
    built.append(hub_rule(cls, repo_id))
    return os.environ["SPACE_URL"]
auto_env.AutoEnv._resolve_space_url = classmethod(resolve)

env = AutoEnv.from_env(os.environ["SPACE_ID"], trust_remote_code=True)
dist = importlib.metadata.distribution(os.environ["SPACE_DIST"])
out = {"built": built, "class": type(env).__name__, "module_file": inspect.getfile(type(env)),
       "base_url": env.base_url, "direct_url": json.loads(dist.read_text("direct_url.json")),
       "files": sorted(str(f) for f in dist.files)}
with env.sync() as e:
    steps = [e.reset(max_steps=2)]
    steps += [e.step({"message": "hello space"}), e.step({"message": "bye"})]
    out["state"] = e.state()
out["steps"] = [{"observation": s.observation, "reward": s.reward, "done": s.done} for s in steps]

token = os.environ.pop("OPENENV_TOKEN")
bare = type(env)(base_url=env.base_url)  # no token= and none in the environment
try:
    with bare.sync() as e:
        e.reset()
    out["without_token"] = "served"
except Exception as exc:
    out["without_token"] = f"{type(exc).__name__}: {exc}"
with type(env)(base_url=env.base_url, token=token).sync() as e:
    e.reset()
    out["with_token_argument"] = e.step({"message": "x"}).reward
print(json.dumps(out))
"""


def test_the_reference_autoenv_installs_the_pushed_space_from_git_and_drives_an_episode_on_its_image(
    served_space: tuple[str, str],
    space_repo: tuple[Path, str],
    hub_git: dict[str, str],
    clean_reference: Reference,
) -> None:
    url, token = served_space
    folder, commit = space_repo
    said = clean_reference.run(
        _FROM_ENV,
        timeout=300,
        env={
            **hub_git,
            "SPACE_URL": url,
            "SPACE_ID": SPACE_ID,
            "SPACE_DIST": PACKAGE.distribution,
            "OPENENV_TOKEN": token,
        },
    )
    # The reference built the Hub's host for the Space, the one our Dockerfile answers to.
    assert said["built"] and set(said["built"]) == {"https://openenv-test-echo-space.hf.space"}
    assert "--allowed-host openenv-test-echo-space.hf.space" in (folder / "Dockerfile").read_text()
    # It pip-installed the Hub URL, which git took from the pushed repository at its commit.
    assert said["direct_url"] == {
        "url": f"https://huggingface.co/spaces/{SPACE_ID}",
        "vcs_info": {"commit_id": commit, "vcs": "git"},
    }
    assert said["class"] == PACKAGE.client_class == "EchoSpaceEnv"
    venv = clean_reference.python.parents[1].resolve()
    assert (
        Path(said["module_file"]).resolve().is_relative_to(venv)
    )  # installed into its venv, not run from the folder
    assert (
        f"{PACKAGE.module}/client.py" in said["files"] and f"{PACKAGE.module}/openenv.yaml" in said["files"]
    )
    assert not any(f.startswith(("openenv/", "env/", "echo_env/")) for f in said["files"])  # the client only
    assert said["base_url"] == url
    # An episode on the Space's image, through the installed client.
    reset, hello, bye = said["steps"]
    assert reset["done"] is False and reset["observation"]["echoed_message"] == ""
    assert hello["observation"] == {
        **hello["observation"],
        "echoed_message": "hello space",
        "message_length": 11,
    }
    assert hello["reward"] == pytest.approx(1.1) and hello["done"] is False
    assert bye["reward"] == pytest.approx(0.3) and bye["done"] is True
    assert said["state"]["step_count"] == 2
    # The episode is behind the token: the same class without it is refused; token= is a way to give it.
    assert "401" in said["without_token"] or "nauthorized" in said["without_token"], said["without_token"]
    assert said["with_token_argument"] == pytest.approx(0.1)


def test_the_public_space_answers_the_probe_and_nothing_else_without_its_token(
    served_space: tuple[str, str],
) -> None:
    url, token = served_space
    assert httpx.get(f"{url}/health", timeout=5).status_code == 200  # what the reference probes, headers-less
    for method, path in (
        ("POST", "/reset"),
        ("GET", "/state"),
        ("GET", "/metadata"),
        ("GET", "/schema"),
        ("POST", "/mcp"),
    ):
        answer = httpx.request(method, f"{url}{path}", json={} if method == "POST" else None, timeout=5)
        assert answer.status_code == 401, (method, path, answer.status_code)
    wrong = httpx.post(
        f"{url}/reset", json={}, headers={"Authorization": "Bearer " + "x" * len(token)}, timeout=5
    )
    assert wrong.status_code == 401
    assert (
        httpx.post(
            f"{url}/reset", json={}, headers={"Authorization": f"Bearer {token}"}, timeout=5
        ).status_code
        == 200
    )


@pytest.mark.parametrize("secret", [None, "short-token"])
def test_a_public_space_without_a_real_token_secret_does_not_serve(
    space_image: str, secret: str | None
) -> None:
    """Without the secret, `openenv serve` would make a token and print it to the log, which a public
    Space must not do; the Space refuses to start and says why."""
    import docker
    import docker.errors

    environment = {} if secret is None else {"OPENENV_TOKEN": secret}
    with pytest.raises(docker.errors.ContainerError) as refused:
        docker.from_env().containers.run(
            **_run_as_spaces_do(space_image, remove=True, environment=environment, network_mode="none")
        )
    assert refused.value.exit_status == 78
    assert b"needs the Space secret OPENENV_TOKEN" in (refused.value.stderr or b"")
