"""A harness env's Space as the Hub runs it: built from `openenv push --dry-run pi`'s folder, run under
`docker run --user 1000 --cap-drop ALL` with the default seccomp profile and a read-only root (only /tmp
and /data writable), published on 127.0.0.1 only; an oracle episode reaches reward 1 through our client
and through the reference OpenEnv's `GenericEnvClient`.

Nothing can be pulled here, so the Space's public base images are substituted by the offline ones
(scripts/build_python_image.sh) and each substitution is printed. The image keeps one tag, so its layers
(the dependencies' above all) stay cached between runs. The engine is the session's vLLM on the host's
loopback, reached as Docker sandboxes reach the proxy: a unix socket mounted from the host
(`UnixToTcpBridge`) and the stdlib forwarder inside on the container's own 127.0.0.1; on the Hub it is
the `OPENENV_VLLM_URL` secret. No traffic goes to docker0.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from openenv.client.env_client import EnvClient
from openenv.core.net import free_port, wait_for_health
from openenv.errors import TransportError
from openenv.harness.catalog import get_spec
from openenv.harness.env_image import SPACE_BASES
from openenv.harness.forwarder import UnixToTcpBridge
from openenv.harness.install import install_status
from openenv.harness.models import HarnessAction, HarnessObservation, HarnessState
from openenv.harness.oracle import OraclePolicy
from openenv.harness.sandbox.docker import engine_available
from openenv.harness.tasks import builtin_task
from openenv.testing.space import build_space_image
from tests.interop.conftest import Reference, reference  # noqa: F401  (the fixture, shared with tests/interop)

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
TASK = "fix-temperature-conversion"
TAG = "openenv-test/space-pi:cached"
LABELS = {"openenv.test": "space"}
# The offline stand-ins of the Space's public bases.
OFFLINE = {
    SPACE_BASES["BASE_IMAGE"]: "openenv/python:latest",
    SPACE_BASES["NODE_IMAGE"]: "openenv/base:latest",
}


class HarnessClient(EnvClient[HarnessAction, HarnessObservation, HarnessState]):
    pass


@pytest.fixture(scope="module")
def space_image(tmp_path_factory: pytest.TempPathFactory) -> str:
    if (reason := engine_available()) is not None:
        pytest.skip(f"{reason}; run scripts/install.sh --all")
    if not install_status(get_spec("pi")).ready:
        pytest.skip("pi is not installed; run scripts/install.sh --all")
    subprocess.run(["bash", str(REPO / "scripts" / "build_python_image.sh")], check=True)
    space = tmp_path_factory.mktemp("space") / "pi"
    subprocess.run(
        [sys.executable, "-m", "openenv.cli.main", "push", "pi", "--dry-run", "--out", str(space)],
        check=True,
        capture_output=True,
        text=True,
    )
    dockerfile = (space / "Dockerfile").read_text()
    instructions = [line for line in dockerfile.splitlines() if line and not line.startswith("#")]
    assert "USER 1000" in instructions and not any(
        "SYS_ADMIN" in line or "seccomp" in line for line in instructions
    )
    # Every FROM is a public image we stand in for.
    return build_space_image(
        space, TAG, substitutes=OFFLINE, labels=LABELS, expect_args=["BASE_IMAGE", "NODE_IMAGE"]
    )


@pytest.fixture(scope="module")
def space(
    space_image: str, vllm_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, str]]:
    """The Space's container, run as Spaces run it; yields (URL, token)."""
    import docker

    client = docker.from_env()
    port, token = free_port(), secrets.token_urlsafe(16)
    engine = urlsplit(vllm_url)
    sock_dir = tmp_path_factory.mktemp("engine")
    sock_dir.chmod(0o755)  # uid 1000 enters the mount and connects to the socket
    bridge = UnixToTcpBridge(
        sock_dir / "engine.sock", engine.hostname or "127.0.0.1", engine.port or 80
    ).start()
    (sock_dir / "engine.sock").chmod(0o666)
    command = [
        "sh",
        "-c",
        (
            "python -m openenv.harness.forwarder --listen 127.0.0.1:8001 "
            '--to-unix /engine/engine.sock & exec "$@"'
        ),
        "sh",
        *client.images.get(space_image).attrs["Config"]["Cmd"],
    ]
    container = client.containers.run(
        space_image,
        command,
        detach=True,
        remove=True,
        labels=LABELS,
        user="1000",
        cap_drop=["ALL"],
        read_only=True,
        tmpfs={"/tmp": "rw,exec,mode=1777", "/data": "rw,mode=1777"},
        ports={"7860/tcp": ("127.0.0.1", port)},
        volumes={str(sock_dir): {"bind": "/engine", "mode": "rw"}},
        environment={"OPENENV_VLLM_URL": "http://127.0.0.1:8001", "OPENENV_TOKEN": token},
    )
    url = f"http://127.0.0.1:{port}"
    try:
        host = client.api.inspect_container(container.id)["HostConfig"]
        assert (
            host["CapDrop"] == ["ALL"] and not host["CapAdd"] and not host["SecurityOpt"]
        )  # default seccomp
        assert host["ReadonlyRootfs"] and not host["Privileged"]

        def gone() -> str | None:
            container.reload()
            return (
                None if container.status in ("created", "running") else f"the container is {container.status}"
            )

        try:
            wait_for_health(url, timeout_s=120, gone=gone, interval_s=0.3)
        except TransportError as exc:
            pytest.fail(f"{exc}\n{container.logs(tail=30).decode(errors='replace')}")
        who = container.exec_run(
            ["sh", "-c", "id -u; grep -E '^(CapEff|Seccomp):' /proc/1/status"]
        ).output.decode()
        assert who.split()[0] == "1000" and "CapEff:\t0000000000000000" in who and "Seccomp:\t2" in who, who
        yield url, token
    finally:
        logs = container.logs(tail=40).decode(errors="replace")
        container.stop(timeout=5)
        bridge.close()
        print(f"[space] container log tail:\n{logs}")


def test_an_oracle_episode_through_our_client_scores_one_in_the_space(space: tuple[str, str]) -> None:
    url, token = space
    oracle = OraclePolicy(get_spec("pi"), builtin_task(TASK))
    with HarnessClient(url, token=token, request_timeout_s=300).sync() as env:
        obs = env.reset(task=TASK, policy="oracle")
        first_prompt = len(obs.pending.prompt_ids) if obs.pending is not None else 0
        while not obs.done:
            assert obs.pending is not None
            obs = env.step(
                HarnessAction(kind="complete", text=oracle.reply(obs.pending.request, aux=obs.pending.aux))
            )
    assert obs.reward == 1.0, (obs.reward_status, obs.no_reward_reason, obs.output_tail)
    assert first_prompt > 100 and obs.turns >= 2 and obs.stats is not None and obs.stats.merge_ratio == 1.0


_REFERENCE_DRIVER = """
import json, os, sys
from openenv.core.generic_client import GenericEnvClient

def say(result):
    print(json.dumps({"observation": result.observation, "reward": result.reward, "done": result.done}), flush=True)

client = GenericEnvClient(base_url=os.environ["SPACE_URL"], message_timeout_s=300,
                          headers={"Authorization": "Bearer " + os.environ["SPACE_TOKEN"]})
with client.sync() as env:
    result = env.reset(task=os.environ["SPACE_TASK"], policy="oracle")
    say(result)
    while not result.done:
        result = env.step(json.loads(sys.stdin.readline()))
        say(result)
"""


def test_an_oracle_episode_through_the_reference_generic_client_scores_one_in_the_space(
    space: tuple[str, str], reference: Reference
) -> None:
    """Only the reference's client talks to the Space; our oracle reads each observation it prints and
    answers with the action it sends next (its replies in the model's tool-call format)."""
    url, token = space
    oracle = OraclePolicy(get_spec("pi"), builtin_task(TASK))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env.update(SPACE_URL=url, SPACE_TOKEN=token, SPACE_TASK=TASK)
    proc = subprocess.Popen(
        [str(reference.python), "-I", "-c", _REFERENCE_DRIVER],
        cwd=reference.workdir,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    seen: list[HarnessObservation] = []
    try:
        assert proc.stdout is not None and proc.stdin is not None
        for line in proc.stdout:
            said: dict[str, Any] = json.loads(line)
            obs = HarnessObservation.model_validate(
                {**said["observation"], "reward": said["reward"], "done": said["done"]}
            )
            seen.append(obs)
            if obs.done:
                break
            assert obs.pending is not None and obs.pending.prompt_ids, said["observation"]
            reply = oracle.reply(obs.pending.request, aux=obs.pending.aux)
            proc.stdin.write(json.dumps({"kind": "complete", "text": reply}) + "\n")
            proc.stdin.flush()
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""
    assert seen and seen[-1].done and seen[-1].reward == 1.0, seen[-1] if seen else "no observation"
    assert len(seen[0].pending.prompt_ids) > 100  # type: ignore[union-attr]
