"""A real harness (pi) that misbehaves mid-episode: killed, hung, or exiting non-zero.

tests/harness/test_environment.py covers a stand-in harness that crashes or hangs *after* a turn is
answered and one that exits before its first request. Here the real CLI fails while its request is
parked or being answered, and each episode must end with the right status within its timeout, with no
process left (psutil: no descendant of this test, no sandbox-marked process, no member of the harness's
process group) and no capture session left open.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from typing import Any

import psutil
import pytest

from openenv.capture.backends import VLLMBackend
from openenv.capture.renderer import Renderer
from openenv.capture.server import CaptureServer
from openenv.harness.catalog import get_spec
from openenv.harness.environment import HarnessEnvironment
from openenv.harness.install import install_status
from openenv.harness.models import HarnessAction, HarnessObservation
from openenv.harness.rollout import run_episode
from openenv.harness.sandbox.local import sandboxed_processes
from openenv.harness.tasks import builtin_task
from openenv.soak.faults import FaultProxy

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

TASK = builtin_task("fix-deep-merge")


@pytest.fixture
def server(fault_proxy: FaultProxy, renderer: Renderer) -> Iterator[CaptureServer]:
    with CaptureServer(backend=VLLMBackend(fault_proxy.url, timeout=60), renderer=renderer) as capture:
        yield capture


@pytest.fixture
def env(server: CaptureServer) -> Iterator[HarnessEnvironment]:
    if not install_status(get_spec("pi")).ready:
        pytest.skip("pi is not installed; run scripts/install_harnesses.sh pi")
    environment = HarnessEnvironment("pi", server=server)
    yield environment
    environment.close()


def harness_process() -> psutil.Process:
    """The harness: the one direct child of this test process started by a sandbox (its marker)."""
    found = [p for p in sandboxed_processes() if p.ppid() == os.getpid()]
    assert len(found) == 1, f"expected one sandboxed child, found {found}"
    return found[0]


def finish(env: HarnessEnvironment, server: CaptureServer, leaks: Any, pgid: int) -> tuple[list[str], int]:
    """Close the env, then what outlived it: processes (after up to 10 s) and open proxy sessions."""
    env.close()
    return leaks.settle(groups=[pgid]), len(server.registry.sessions)


def test_killed_while_its_request_is_parked_ends_as_crashed(
    env: HarnessEnvironment,
    server: CaptureServer,
    leaks: Any,
    figures: Any,
) -> None:
    obs = env.reset(task=TASK, timeout_s=120)
    assert obs.pending is not None and not obs.done, obs.output_tail
    harness = harness_process()
    leaks.snapshot()
    harness.send_signal(signal.SIGKILL)  # someone else's SIGKILL (the OOM killer, a user): not ours
    start = time.monotonic()
    obs = env.step(HarnessAction(kind="sample"))  # the answer goes to a dead connection
    ended_s = time.monotonic() - start
    leftover, open_sessions = finish(env, server, leaks, harness.pid)
    figures.record(
        status=obs.harness_status,
        time_to_end_s=round(ended_s, 2),
        turns=obs.turns,
        leaked_processes=len(leftover),
        open_sessions=open_sessions,
    )
    assert obs.done and obs.harness_status == "crashed" and obs.reward == 0.0, obs.output_tail
    assert env.state.status == "done" and env.state.harness_status == "crashed"
    assert ended_s < 30, "the env noticed the dead harness at the step, not at the episode deadline"
    assert leftover == [] and open_sessions == 0


def test_hung_with_a_turn_in_flight_ends_as_timeout_at_its_deadline(
    env: HarnessEnvironment,
    server: CaptureServer,
    leaks: Any,
    figures: Any,
) -> None:
    """SIGSTOP freezes the real CLI mid-episode: it never reads its reply, never asks again, never exits."""
    timeout_s = 20.0
    start = time.monotonic()
    obs = env.reset(task=TASK, timeout_s=timeout_s)
    assert obs.pending is not None, obs.output_tail
    harness = harness_process()
    leaks.snapshot()
    harness.send_signal(signal.SIGSTOP)
    obs = env.step(HarnessAction(kind="sample"))
    ended_s = time.monotonic() - start
    leftover, open_sessions = finish(env, server, leaks, harness.pid)
    figures.record(
        status=obs.harness_status,
        timeout_s=timeout_s,
        time_to_end_s=round(ended_s, 2),
        overrun_s=round(ended_s - timeout_s, 2),
        leaked_processes=len(leftover),
        open_sessions=open_sessions,
    )
    assert obs.done and obs.harness_status == "timeout", obs.output_tail
    assert timeout_s - 1 <= ended_s < timeout_s + 15, "killed at its deadline (plus grading), not later"
    assert leftover == [] and open_sessions == 0


def test_exits_nonzero_when_the_backend_rejects_its_request_and_ends_as_failed(
    env: HarnessEnvironment,
    server: CaptureServer,
    fault_proxy: FaultProxy,
    leaks: Any,
    figures: Any,
) -> None:
    """A 4xx from vLLM is the request's fault: the harness gets a non-retryable 400 and gives up."""
    obs = env.reset(task=TASK, timeout_s=120)
    assert obs.pending is not None, obs.output_tail
    harness = harness_process()
    leaks.snapshot()
    fault_proxy.set("error", status=400)
    start = time.monotonic()
    steps = 0
    while not obs.done and steps < 10:  # a harness that retried a 400 would keep coming back
        obs = env.step(HarnessAction(kind="sample"))
        steps += 1
    ended_s = time.monotonic() - start
    records = env.trajectory()
    leftover, open_sessions = finish(env, server, leaks, harness.pid)
    gaps = [r for r in records if r.gap is not None]
    figures.record(
        status=obs.harness_status,
        time_to_end_s=round(ended_s, 2),
        steps=steps,
        attempts=fault_proxy.stats["error"],
        gaps=len(gaps),
        leaked_processes=len(leftover),
        open_sessions=open_sessions,
    )
    assert obs.done and obs.harness_status == "failed", f"{obs.harness_status}\n{obs.output_tail}"
    assert gaps and all("BadRequest" in (r.gap or "") for r in gaps)
    assert obs.turns == 0 and not obs.sequences, "a rejected turn is never trained on"
    assert leftover == [] and open_sessions == 0


def test_an_engine_that_dies_mid_episode_ends_it_as_an_error_with_no_reward(
    env: HarnessEnvironment,
    server: CaptureServer,
    fault_proxy: FaultProxy,
    leaks: Any,
    figures: Any,
) -> None:
    """Turn 1 is answered, then vLLM stops answering for good (every connection dropped). Pi retries, gives
    up, and exits: the episode is status `error` (our side), reward None, the cause in the summary; the
    answered turn is still in the trajectory. It used to be status failed, reward 0, `scored`."""

    def die_after_turn_one(obs: HarnessObservation) -> None:
        leaks.snapshot()
        if obs.turns == 1 and obs.pending is not None:
            fault_proxy.set("down")  # every later request, until the test ends

    start = time.monotonic()
    # The oracle (turn 1 looks, then edits): the episode goes on after turn 1 whatever the tiny model would
    # sample, and each of its replies is scored by the engine, so every later turn needs vLLM.
    obs, summary = run_episode(
        env, TASK, policy="oracle", look_first=True, on_step=die_after_turn_one, timeout_s=180
    )
    ended_s = time.monotonic() - start
    records = env.trajectory()
    leftover = leaks.settle()
    figures.record(
        status=summary.status,
        harness_status=summary.harness_status,
        reward=summary.reward,
        turns=summary.turns,
        dropped=fault_proxy.stats["down"],
        time_to_end_s=round(ended_s, 2),
        leaked_processes=len(leftover),
    )
    detail = summary.model_dump_json(indent=1)
    assert summary.status == "error" and summary.reward is None and obs.reward is None, detail
    assert (
        summary.error and "failed on our side" in summary.error and "BackendUnavailable" in summary.error
    ), detail
    assert summary.turns >= 1 and fault_proxy.stats["down"] >= 1, detail
    assert records[-1].gap is not None and any(r.gap is None for r in records if not r.aux)
    assert leftover == [] and len(server.registry.sessions) == 0
