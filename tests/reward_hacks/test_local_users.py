"""Local-user attacks (issue 30, findings 3 and 4): another unprivileged user on the same host, during a
live episode, in both sandboxes.

- Finding 3: the sandbox root was 0755 and its subfolders kept the umask, so a second user read the session
  token in the harness config (`home/.pi/agent/models.json`), `solution/solve.sh`, the workspace and the
  harness log, and the forwarder's unix socket was 0666. Now the root is 0700 and the sockets 0600.
- Finding 4: the Docker sandbox ran the agent as uid 1000, a real account here (`cloudsdk`): as that user
  one wrote into the workspace and read `/proc/<pid>/environ` of the harness. Now the sandbox uid is one
  no host account has, checked at start (an account made here with the configured uid is refused).

The second user is a uid no account has (`setpriv`, as root), or an account `useradd` makes and `userdel`
removes. Rows go into the red-team figure as `local-user` attacks, apart from the agent's own tricks.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import socket
import subprocess
from collections.abc import Iterator

import pytest

from openenv.errors import EnvError
from openenv.harness.sandbox import LocalSandbox
from openenv.harness.sandbox import isolation as isolation_mod
from openenv.harness.sandbox.docker import DOCKER_UID, DockerSandbox

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="a second local user needs root to act as (setpriv)"
)

SECRET = "openenv-secret-7f3a"
OLD_DOCKER_UID = 1000  # the Docker sandbox's uid before issue 30 (a real account on the red-team's host)


def _free_uid(start: int) -> int:
    uid = start
    while True:
        try:
            pwd.getpwuid(uid)
        except KeyError:
            if uid not in (isolation_mod.SANDBOX_UID, DOCKER_UID):
                return uid
        uid += 1


def as_user(uid: int, script: str) -> subprocess.CompletedProcess[str]:
    """Run `sh -c script` as `uid` (no groups, no capabilities): an ordinary local user."""
    return subprocess.run(
        [
            "setpriv",
            f"--reuid={uid}",
            f"--regid={uid}",
            "--clear-groups",
            "--inh-caps=-all",
            "sh",
            "-c",
            script,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd="/",
    )


@pytest.fixture
def proxy_port() -> Iterator[int]:
    """A listening 127.0.0.1 port standing in for the capture proxy (the sandbox bridges a socket to it)."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        yield listener.getsockname()[1]


@pytest.fixture
def host_account() -> Iterator[tuple[str, int]]:
    """A real host account (useradd), removed after the test: the uid a careless sandbox might share."""
    uid = _free_uid(63100)
    name = f"oe-redteam-{uid}"
    subprocess.run(
        ["useradd", "--uid", str(uid), "--no-create-home", "--shell", "/usr/sbin/nologin", name],
        check=True,
        capture_output=True,
    )
    try:
        yield name, uid
    finally:
        subprocess.run(["userdel", name], capture_output=True)


def _episode(kind: str, port: int, request: pytest.FixtureRequest) -> LocalSandbox | DockerSandbox:
    if kind == "local":
        return LocalSandbox(forward_ports=(port,))
    return DockerSandbox(forward_ports=(port,), client=request.getfixturevalue("client"))


@pytest.mark.parametrize("kind", ["local", "docker"])
def test_another_local_user_reads_nothing_of_a_live_episode(
    kind: str, proxy_port: int, request: pytest.FixtureRequest, outcome
) -> None:
    other = _free_uid(62400)
    with _episode(kind, proxy_port, request) as box:
        box.write_files({".pi/agent/models.json": f'{{"apiKey": "{SECRET}"}}'}, under=box.home)
        box.stage("/solution", {"solve.sh": f"echo {SECRET}\n"})
        box.write_files({"notes.txt": SECRET})
        process = box.start(["sh", "-c", f"echo {SECRET}; sleep 60"], env={}, timeout_s=60)
        sock = next((box.root / "sock").glob("*.sock"), None)
        logs = " ".join(str(p) for p in (box.root / "logs").glob("*.log"))
        targets = {
            "session token": box.home / ".pi" / "agent" / "models.json",
            "solution": box.host_path("/solution/solve.sh"),
            "workspace": box.workspace / "notes.txt",
        }
        reads = {what: as_user(other, f"cat {path}") for what, path in targets.items()}
        reads["harness log"] = as_user(other, f"cat {logs}")
        if sock is not None:  # the proxy's unix socket (Docker's; the local sandbox's forwarders)
            connect = as_user(
                other,
                f"python3 -c \"import socket; socket.socket(socket.AF_UNIX).connect('{sock}')\" && echo CONNECTED",
            )
        else:  # the local sandbox's own namespace, where the proxy's port listens (sandbox/netns.py)
            namespace = getattr(box, "network_namespace", None)
            assert namespace is not None, "the sandbox reaches the proxy neither by a socket nor a namespace"
            connect = as_user(
                other,
                f'nsenter --net={namespace} python3 -c "import socket; '
                f"socket.create_connection(('127.0.0.1', {proxy_port}), timeout=5)\" && echo CONNECTED",
            )
        listing = as_user(other, f"ls {box.root}")
        root_mode = box.root.stat().st_mode & 0o777
        sock_mode = sock.stat().st_mode & 0o777 if sock is not None else 0o600
        process.kill()
    leaked = [what for what, result in reads.items() if SECRET in result.stdout]
    leaked += ["proxy socket"] if "CONNECTED" in connect.stdout else []
    leaked += ["sandbox listing"] if listing.returncode == 0 else []
    outcome(
        trick="another local user reads the episode and its session token",
        sandbox=kind,
        category="local-user",
        blocked=not leaked,
        reward=None,
        status=", ".join(leaked) or "refused",
        survivors=0,
        armed=True,
    )
    assert not leaked, (
        f"uid {other} read {leaked} of a live {kind} episode (root {oct(root_mode)}, socket {oct(sock_mode)})"
    )
    assert root_mode & 0o077 == 0 and sock_mode == 0o600, (oct(root_mode), oct(sock_mode))


def test_the_old_docker_uid_reaches_nothing_of_the_episode(request: pytest.FixtureRequest, outcome) -> None:
    """As uid 1000 (the old sandbox uid, an account on the red-team's host): no write into the workspace,
    no read of the harness's environment (its /proc/<pid>/environ holds what the harness was given)."""
    with DockerSandbox(client=request.getfixturevalue("client")) as box:
        process = box.start(["sh", "-c", "sleep 60"], env={"OPENENV_SECRET": SECRET}, timeout_s=60)
        write = as_user(OLD_DOCKER_UID, f"echo planted > {box.workspace}/planted.txt && echo WROTE")
        reward = as_user(
            OLD_DOCKER_UID, f"echo 1 > {box.host_path('/logs/verifier')}/reward.txt && echo WROTE"
        )
        environ = as_user(OLD_DOCKER_UID, f"tr '\\0' '\\n' < /proc/{process.pid}/environ")
        process.kill()
    reached = [
        what
        for what, result in {"workspace": write, "reward folder": reward}.items()
        if "WROTE" in result.stdout
    ]
    reached += ["harness environ"] if SECRET in environ.stdout else []
    outcome(
        trick="the host account with the agent's uid writes the episode and reads the harness",
        sandbox="docker",
        category="local-user",
        blocked=not reached,
        reward=None,
        status=", ".join(reached) or "refused",
        survivors=0,
        armed=process.pid > 0,
    )
    assert process.pid > 0
    assert not reached, f"uid {OLD_DOCKER_UID} reached {reached}"


@pytest.mark.parametrize("kind", ["local", "docker"])
def test_a_sandbox_uid_that_a_host_account_has_is_refused(
    kind: str, host_account: tuple[str, int], monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    name, uid = host_account
    with pytest.raises(EnvError, match=name):
        if kind == "local":
            monkeypatch.setattr(isolation_mod, "SANDBOX_UID", uid)
            LocalSandbox().close()
        else:
            DockerSandbox(user=f"{uid}:{uid}", client=request.getfixturevalue("client")).close()


@pytest.mark.parametrize("uid", [isolation_mod.SANDBOX_UID, DOCKER_UID], ids=["local", "docker"])
def test_no_host_account_has_a_default_sandbox_uid(uid: int) -> None:
    with contextlib.suppress(KeyError):
        pytest.fail(f"the default sandbox uid {uid} is the host account {pwd.getpwuid(uid).pw_name!r}")
