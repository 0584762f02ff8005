"""DockerSandbox on a real Docker engine: isolation, limits, statuses, cleanup, grading, episodes.

Fixtures (engine, stand-in proxy, sandbox) are in conftest.py; tests are skipped, with the reason, only
when no engine answers (scripts/install_docker.sh starts one).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import docker
import pytest

from openenv.errors import BadRequest, EnvError, SandboxLost
from openenv.harness.sandbox.base import HarnessProcess, Sandbox
from openenv.harness.sandbox.docker import DOCKER_UID, DockerSandbox
from openenv.harness.sandbox.docker_episode import verify_isolated
from openenv.harness.sandbox.sweeper import KIND_LABEL
from openenv.harness.tasks.model import Task


def _py(sandbox: DockerSandbox, code: str, timeout_s: float = 30) -> str:
    result = sandbox.run(["python3", "-c", code], timeout_s=timeout_s)
    assert result.exit_code == 0, result.output
    return result.output


def test_docker_sandbox_implements_the_sandbox_protocol(sandbox: DockerSandbox) -> None:
    assert isinstance(sandbox, Sandbox)
    assert isinstance(sandbox.start(["true"], env={}, timeout_s=10), HarnessProcess)


def test_commands_run_as_non_root_on_a_read_only_root(sandbox: DockerSandbox) -> None:
    out = sandbox.run(["sh", "-c", "id -u; touch /etc/owned 2>&1; echo HOME=$HOME; pwd"]).output
    uid, touch, home, cwd = out.strip().splitlines()
    assert uid == str(DOCKER_UID)  # a uid no host account has (issue 30: 1000 was a real user)
    assert "Read-only file system" in touch
    assert home == f"HOME={sandbox.home}"
    assert cwd == sandbox.workdir == "/app"


def test_workspace_is_shared_both_ways_and_hidden_dirs_are_not_mounted(sandbox: DockerSandbox) -> None:
    sandbox.write_files({"pkg/app.py": "X = 1\n"})
    hidden = sandbox.private_dir("tests")
    (hidden / "test_secret.py").write_text("assert True\n")
    out = sandbox.run(
        ["sh", "-c", f"echo 'Y = 2' >> pkg/app.py; ls {sandbox.root}; echo new > made.txt"]
    ).output
    assert hidden.parent.name == "private"
    assert out.split() == ["home", "logs", "sock", "tmp"]  # no `private`; the workspace is at /app
    assert sandbox.read_file("pkg/app.py") == "X = 1\nY = 2\n"
    assert sandbox.read_file("made.txt") == "new\n"


def test_container_limits_labels_and_isolation_settings(
    sandbox: DockerSandbox, client: docker.DockerClient
) -> None:
    attrs = client.api.inspect_container(sandbox.container.id)
    host = attrs["HostConfig"]
    assert (host["NetworkMode"], host["ReadonlyRootfs"], host["CapDrop"]) == ("none", True, ["ALL"])
    assert (host["NanoCpus"], host["Memory"], host["PidsLimit"]) == (1_500_000_000, 768 << 20, 256)
    assert attrs["Config"]["Labels"]["openenv.episode"] == sandbox.id
    assert attrs["Config"]["Labels"]["openenv.owner"].split("/")[1].isdigit()
    cgroup = sandbox.run(
        ["cat", "/sys/fs/cgroup/pids/pids.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"]
    )
    assert cgroup.output.split() == ["256", str(768 << 20)]


def test_the_proxy_port_is_reachable_inside_through_the_forwarder(
    sandbox: DockerSandbox, proxy_port: int
) -> None:
    out = _py(
        sandbox, f"import urllib.request as u; print(u.urlopen('http://127.0.0.1:{proxy_port}/').read())"
    )
    assert out.strip() == "b'proxy says hi'"


_PROBES = """
import json, socket
def attempt(fn):
    try:
        fn()
        return "reached"
    except OSError as exc:
        return type(exc).__name__ + ":" + str(getattr(exc, "errno", ""))
def tcp(host, port):
    return lambda: socket.create_connection((host, port), timeout=3).close()
print(json.dumps({
    "host_loopback_port": attempt(tcp("127.0.0.1", HOST_PORT)),
    "dns": attempt(lambda: socket.getaddrinfo("example.com", 443)),
    "external_literal": attempt(tcp("1.1.1.1", 443)),
    "external_v6_literal": attempt(tcp("2606:4700:4700::1111", 443)),
    "interfaces": sorted(l.split(":")[0].strip() for l in open("/proc/net/dev").readlines()[2:]),
}))
"""


def test_nothing_but_the_proxy_is_reachable_from_inside(sandbox: DockerSandbox, host_only_port: int) -> None:
    """Every failure here is decided inside the container (no route, no resolver): no packet leaves it."""
    results = json.loads(_py(sandbox, _PROBES.replace("HOST_PORT", str(host_only_port))))
    assert results["interfaces"] == ["lo"]
    assert results["host_loopback_port"] == "ConnectionRefusedError:111"
    assert results["dns"].startswith("gaierror:")
    assert results["external_literal"] == "OSError:101"  # ENETUNREACH: no route out of the container
    assert results["external_v6_literal"].split(":")[-1] in {"101", "99"}


def test_statuses_of_exited_failed_crashed_and_timed_out_processes(sandbox: DockerSandbox) -> None:
    cases = {
        "exited": (["true"], 10),
        "failed": (["sh", "-c", "exit 3"], 10),
        "crashed": (["sh", "-c", "kill -SEGV $$"], 10),
        "timeout": (["sleep", "60"], 0.5),
    }
    processes = {name: sandbox.start(argv, env={}, timeout_s=t) for name, (argv, t) in cases.items()}
    assert {name: p.wait(15) for name, p in processes.items()} == {name: name for name in cases}
    assert processes["failed"].exit_code() == 3


def test_timeout_kills_the_whole_tree_including_setsid_daemons(sandbox: DockerSandbox) -> None:
    process = sandbox.start(["sh", "-c", "setsid sleep 300 & sleep 300 & wait"], env={}, timeout_s=1)
    time.sleep(0.5)
    assert len(sandbox.leftover_pids()) >= 3
    assert process.wait(10) == "timeout"
    assert sandbox.leftover_pids() == []


def test_a_container_killed_from_outside_is_a_clean_sandbox_lost(
    sandbox: DockerSandbox, client: docker.DockerClient, ours: Callable[[], list[str]]
) -> None:
    process = sandbox.start(["sleep", "300"], env={}, timeout_s=300)
    client.containers.get(sandbox.container.id).kill()
    started = time.monotonic()
    assert process.wait(20) == "crashed"
    assert time.monotonic() - started < 10
    assert process.lost
    assert (sandbox.lost_reason() or "").startswith("sandbox lost:")
    assert "sandbox lost" in process.output_tail()
    with pytest.raises(SandboxLost, match="sandbox lost"):
        sandbox.run(["true"])
    sandbox.close()
    assert sandbox.container.short_id not in ours()


def test_a_process_killed_with_its_container_is_lost_even_while_the_engine_still_says_running(
    sandbox: DockerSandbox, client: docker.DockerClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The engine records an exec's end (exit 137) before its container's: it tears the container's
    network and mounts down first, and a poll in that gap still reads the container as running. The gap cannot be held open on demand, so its two answers
    are replayed (the exec ended by SIGKILL, the container not yet reported lost) over a container
    that is really dead; a healthy container running the same crash is the control."""
    crash = sandbox.start(["sh", "-c", "kill -KILL $$"], env={}, timeout_s=30)
    assert crash.wait(10) == "crashed" and not crash.lost  # the container outlived it
    assert sandbox.run(["true"]).exit_code == 0
    process = sandbox.start(["sleep", "300"], env={}, timeout_s=300)
    client.containers.get(sandbox.container.id).kill()
    monkeypatch.setattr(process, "_inspect", lambda: {"Running": False, "ExitCode": 137, "Pid": 0})
    monkeypatch.setattr(sandbox, "lost_reason", lambda: None)
    assert process.status() == "crashed"
    assert process.lost
    assert "sandbox lost" in process.output_tail()


def _episode(client: docker.DockerClient, port: int, n: int) -> str:
    """One short episode with an injected failure, chosen by `n`; returns the final status."""
    with DockerSandbox(forward_ports=(port,), client=client) as box:
        box.write_files({"task.txt": f"episode {n}\n"})
        argv, timeout_s = [
            (["sh", "-c", "kill -KILL $$"], 30),  # harness crash
            (["sleep", "60"], 0.3),  # harness hangs past its deadline
            (["sh", "-c", "setsid sleep 600 & exit 1"], 30),  # exits, leaving a daemon
            (["sleep", "60"], 60),  # still running when the episode is closed
        ][n % 4]
        process = box.start(argv, env={}, timeout_s=timeout_s)
        return process.wait(0.5 if n % 4 == 3 else 15)


def test_fifty_episodes_with_crashes_and_timeouts_leave_nothing_behind(
    client: docker.DockerClient, proxy_port: int, ours: Callable[[], list[str]]
) -> None:
    before = (
        len(client.containers.list(all=True, sparse=True)),
        len(client.volumes.list()),
        len(client.networks.list()),
    )
    with ThreadPoolExecutor(max_workers=4) as pool:
        statuses = list(pool.map(lambda n: _episode(client, proxy_port, n), range(50)))
    assert set(statuses) == {"crashed", "timeout", "failed", "running"}
    after = (
        len(client.containers.list(all=True, sparse=True)),
        len(client.volumes.list()),
        len(client.networks.list()),
    )
    assert after == before
    assert ours() == []


def test_verify_isolated_grades_a_copy_in_a_fresh_container(sandbox: DockerSandbox) -> None:
    task = Task(
        id="add",
        instruction="write add()",
        workspace={"calc.py": "def add(a, b):\n    return 0\n"},
        tests={
            "test.sh": 'python3 -c "import calc; assert calc.add(2, 3) == 5" && echo 1 > /logs/verifier/reward.txt\n'
        },
        solution="printf 'def add(a, b):\\n    return a + b\\n' > calc.py",
    )
    sandbox.write_files(task.workspace)
    sandbox.run(["sh", "-c", task.solution])
    # The agent leaves a saboteur that would break the solution during grading.
    sandbox.start(
        ["sh", "-c", "sleep 1; echo 'def add(a, b): return -1' > calc.py; sleep 300"], env={}, timeout_s=300
    )
    verdict = verify_isolated(sandbox, task)
    assert (verdict.reward, verdict.solved, verdict.exit_code) == (1.0, True, 0), verdict.output_tail
    time.sleep(1.2)
    assert "return a + b" in sandbox.read_file("calc.py")


def test_a_missing_image_is_a_clear_error(client: docker.DockerClient) -> None:
    with pytest.raises(EnvError, match="build_base_image.sh"):
        DockerSandbox(image="openenv/does-not-exist:latest", client=client)


@pytest.mark.slow
@pytest.mark.parametrize("harness", ["pi", "codex", "claude-code"])
def test_oracle_episode_in_docker_is_solved_with_one_exact_sequence(
    harness: str, capture_server: object, docker_episodes: dict[str, object], ours: Callable[[], list[str]]
) -> None:
    from openenv.harness.catalog import get_spec
    from openenv.harness.environment import HarnessEnvironment
    from openenv.harness.install import install_status
    from openenv.harness.rollout import run_episode
    from openenv.harness.tasks import builtin_task

    if not install_status(get_spec(harness)).ready:
        pytest.skip(f"{harness} is not installed; run scripts/install_harnesses.sh {harness}")
    env = HarnessEnvironment(harness, server=capture_server, hooks=docker_episodes)
    try:
        obs, summary = run_episode(env, builtin_task("fix-temperature-conversion"), policy="oracle")
    finally:
        env.close()
    detail = f"{summary}\n--- harness output ---\n{obs.output_tail}\n{obs.metadata}"
    assert (summary.reward, summary.status) == (1.0, "exited"), detail
    assert summary.tool_calls >= 1 and summary.turns >= 2, detail
    assert (summary.sequences, summary.merge_ratio) == (1, 1.0), detail
    [row] = obs.sequences or []
    assert len(row.completion_ids) == len(row.logprobs) == len(row.env_mask) > 0
    assert ours() == []


@pytest.mark.slow
def test_a_container_killed_mid_episode_ends_it_cleanly_as_sandbox_lost(
    client: docker.DockerClient,
    capture_server: object,
    docker_episodes: dict[str, object],
    ours: Callable[[], list[str]],
) -> None:
    from openenv.harness.catalog import get_spec
    from openenv.harness.environment import HarnessEnvironment
    from openenv.harness.install import install_status
    from openenv.harness.models import HarnessAction

    if not install_status(get_spec("pi")).ready:
        pytest.skip("pi is not installed; run scripts/install_harnesses.sh pi")
    env = HarnessEnvironment("pi", server=capture_server, hooks=docker_episodes)
    try:
        obs = env.reset(task="fix-temperature-conversion")
        assert obs.pending is not None
        [victim] = client.containers.list(sparse=True, filters={"label": KIND_LABEL})
        victim.kill()
        started = time.monotonic()
        obs = env.step(HarnessAction(kind="complete", text="Done."))  # answered; the harness is gone
        assert time.monotonic() - started < 20
    finally:
        env.close()
    assert obs.done and obs.reward == 0.0
    assert obs.harness_status == "crashed"
    assert "sandbox lost" in obs.output_tail
    assert ours() == []


def test_links_planted_by_the_agent_are_never_followed_on_the_host(
    sandbox: DockerSandbox, tmp_path: Path
) -> None:
    """A link to `/` must not make the host chown, read or copy anything outside the episode."""
    secret = tmp_path / "host-secret"
    secret.write_text("host only\n")
    log = sandbox.root / "logs" / "0-sh.log"  # the process's own log, which the host tails
    script = f"ln -s / root-link; ln -s {secret} leak.txt; mkfifo pipe; rm -f {log}; ln -s {secret} {log}; sleep 300"
    planted = sandbox.start(["sh", "-c", script], env={}, timeout_s=300)
    time.sleep(1)
    sandbox.start(["true"], env={}, timeout_s=10).wait(10)  # start() hands the workspace over again
    assert (secret.stat().st_uid, Path("/etc/hostname").stat().st_uid) == (0, 0)
    with pytest.raises(BadRequest, match="outside"):
        sandbox.read_file("leak.txt")
    assert log.is_symlink()
    assert "host only" not in planted.output_tail()
    task = Task(
        id="t", instruction="-", tests={"test.sh": "echo 1 > /logs/verifier/reward.txt\n"}, solution="true"
    )
    verdict = verify_isolated(sandbox, task)
    assert verdict.solved  # the fifo was skipped, not waited on


def test_shared_mode_grading_ends_the_agent_first_and_sees_only_fresh_folders(sandbox: DockerSandbox) -> None:
    """Harbor's shared mode: the tests run in the agent's container, but only after every agent process
    (a setsid daemon that dropped its marker variable included) is dead, with a fresh reward folder."""
    from openenv.harness.verifier import verify

    daemon = (
        "(setsid env -i sh -c 'while :; do echo 1 > /logs/verifier/reward.txt; sleep 0.05; done' &) ; "
        "echo 1 > /logs/verifier/reward.txt; mkdir -p /logs/verifier/sub; sleep 300"
    )
    sandbox.start(["sh", "-c", daemon], env={}, timeout_s=300)
    # Wait for the agent's forged reward rather than a fixed second: on a loaded machine the container's
    # first command can take longer than that (a fresh-clone CI run read it empty here: "assert '' == '1\n'").
    # The daemon rewrites the file every 0.05 s (`>` truncates first), so a read can see it empty: keep the
    # read that saw the forgery instead of reading again.
    reward = sandbox.host_path("/logs/verifier/reward.txt")
    deadline = time.monotonic() + 60
    seen = ""
    while time.monotonic() < deadline:
        seen = reward.read_text() if reward.is_file() else ""
        if seen == "1\n":
            break
        time.sleep(0.1)
    assert seen == "1\n"
    task = Task(
        id="t",
        instruction="-",
        tests={
            "test.sh": "sleep 1; ls /logs/verifier; test -w /tests || echo 0 > /logs/verifier/reward.txt\n"
        },
        solution="true",
    )
    verdict = verify(sandbox, task)
    assert (verdict.reward, verdict.status) == (0.0, "scored"), verdict
    assert verdict.output_tail.split() == []  # the reward folder was empty when the tests started
    assert sandbox.leftover_pids() == []
