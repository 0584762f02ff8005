"""The documented Ray cluster runs no one else's code (issue 30, finding 6).

The README's `ray start --head ...` had no authentication: another local user's
`ray.init("ray://127.0.0.1:10001")` ran a task that returned `uid=0(root)`. Ray 2.60.0 has token
authentication (`RAY_AUTH_MODE=token`, `RAY_AUTH_TOKEN`); the README and docs/scaling.md now start every
node with it, which the first test checks. The second makes the attack on live clusters in a loopback-only
namespace: a driver without the token runs its task on a cluster started the old way (the control) and
nothing on one started the documented way.
"""

from __future__ import annotations

import secrets
import sys
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("doc", ["docs/scaling.md"])  # the README links it; the commands live there
def test_the_documented_ray_commands_turn_authentication_on(doc: str) -> None:
    blocks, block, inside = [], [], False
    for line in (REPO / doc).read_text().splitlines():
        if line.startswith("```"):
            if inside:
                blocks.append("\n".join(block))
            block, inside = [], not inside
        elif inside:
            block.append(line)
    blocks = [b for b in blocks if "ray start" in b]
    assert blocks, f"{doc} shows no `ray start`"
    for block in blocks:
        before = block[: block.index("ray start")]
        assert "RAY_AUTH_MODE=token" in before and "RAY_AUTH_TOKEN=" in before, block


# ---- the attack on a live cluster -----------------------------------------------------------------------

# Another party's driver: connect to the GCS port it can reach and run a task of its own choosing (the task
# leaves a file behind, so "it ran" is a fact on disk, not a printed claim).
_INTRUDER = """
import os, pathlib, sys
import ray
marker = sys.argv[1]
try:
    ray.init(address="127.0.0.1:6390", log_to_driver=False)

    @ray.remote
    def own() -> int:
        pathlib.Path(marker).write_text(str(os.getuid()))
        return os.getuid()

    print("RAN as uid", ray.get(own.remote(), timeout=90), flush=True)
except Exception as exc:
    print("REFUSED", type(exc).__name__, str(exc)[:300], flush=True)
    sys.exit(3)
"""


# A refused driver retries the same refusal once a second, 20 times by default (Ray's connect window,
# `ray._private.node._init_gcs_client`), before it gives up: the intruder, free to choose its own settings,
# tries 3 times, which is still 3 refusals by the cluster's token check and saves ~17 s per attempt.
_REFUSED_ATTEMPTS = {"RAY_gcs_server_port_wait_time_s": "3"}


def _intrude(cluster: object, tmp_path: Path, **env: str) -> tuple[bool, str]:
    """Run the intruder's driver in the cluster's namespace with no token of its own (an empty HOME, so
    no ~/.ray/auth_token either); True when its task ran."""
    from openenv.testing.ray_cluster import LoopbackRayCluster

    assert isinstance(cluster, LoopbackRayCluster)
    home = tmp_path / "intruder-home"
    home.mkdir(exist_ok=True)
    marker = tmp_path / "intruder-ran"
    marker.unlink(missing_ok=True)
    script = tmp_path / "intruder.py"
    script.write_text(_INTRUDER)
    import subprocess

    try:
        done = cluster.run(
            [sys.executable, str(script), str(marker)],
            timeout=150,
            env={"HOME": str(home), "RAY_AUTH_TOKEN": "", "RAY_AUTH_TOKEN_PATH": str(home / "none"), **env},
        )
        said = (done.stdout + done.stderr)[-600:]
    except subprocess.TimeoutExpired:
        said = "timed out"
    return marker.exists(), said


@pytest.mark.timeout(600)
def test_a_driver_without_the_token_runs_nothing_on_the_documented_cluster(tmp_path: Path) -> None:
    """The control first: a cluster started as the README used to (no authentication) runs the intruder's
    task. Then the documented one (RAY_AUTH_MODE=token, RAY_AUTH_TOKEN on every node): the same driver,
    with no token or a wrong one, runs nothing, while the holder of the token still does."""
    from openenv.testing.ray_cluster import LoopbackRayCluster, cluster_unavailable

    reason = cluster_unavailable()
    if reason:
        pytest.skip(reason)
    token = secrets.token_hex(32)
    with ExitStack() as clusters:
        # Both start at once (each in its own namespace): a node's start is mostly waiting.
        with ThreadPoolExecutor(2) as pool:
            open_cluster, cluster = pool.map(
                clusters.enter_context,
                [
                    LoopbackRayCluster(workers=0, env={"RAY_AUTH_MODE": "disabled"}),
                    LoopbackRayCluster(workers=0, env={"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token}),
                ],
            )
        ran, said = _intrude(open_cluster, tmp_path, RAY_AUTH_MODE="disabled")
        assert ran, f"control: the unauthenticated cluster should run anyone's task: {said}"

        for attempt in (
            {"RAY_AUTH_MODE": "disabled"},
            {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": "0" * 64},
        ):
            ran, said = _intrude(cluster, tmp_path, **attempt, **_REFUSED_ATTEMPTS)
            assert not ran, f"the intruder's task ran on the authenticated cluster ({attempt}): {said}"
            assert "InvalidAuthToken" in said or "Unauthenticated" in said, (
                f"refused, but not by Ray's auth: {said}"
            )
        ran, said = _intrude(cluster, tmp_path, RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=token)
        assert ran, f"the token's holder could not run a task: {said}"
