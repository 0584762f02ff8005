"""Fault injection for every cause of status `error` (openenv/harness/outcome.py), with a stand-in harness.

Each fault is real: an engine that drops every connection (a `FaultProxy` in `down` mode in front of the
proxy's vLLM client), a sandbox that cannot be made, a harness CLI that dies before it asks anything, a
verifier that crashes or outlives its timeout. Each must end as status `error`, reward None (never 0),
the cause in the summary, and count as a failure for training (retried, then masked; never a 0 to learn
from). The real pi through a dying vLLM is in tests/reliability/test_harness_faults.py.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from openenv.capture.backends import VLLMBackend
from openenv.capture.renderer import Renderer
from openenv.capture.server import CaptureServer
from openenv.errors import EnvError
from openenv.harness.environment import DEFAULT_SAMPLING, EpisodeHooks, EpisodeSettings, HarnessEnvironment
from openenv.harness.rollout import run_episode
from openenv.harness.summary import EpisodeSummary
from openenv.harness.tasks import Task
from openenv.soak.faults import FaultProxy
from openenv.train.episode import run_training_episode
from tests.harness.test_environment import _task, fake_harness  # noqa: F401 - the stand-in harness fixture

SHORT = EpisodeSettings(
    sampling=DEFAULT_SAMPLING.model_copy(update={"max_tokens": 4})
)  # the reply's length is not what these test


def _is_error(summary: EpisodeSummary, *causes: str) -> None:
    detail = summary.model_dump_json(indent=1)
    assert summary.status == "error" and summary.reward is None, detail
    assert summary.error and all(cause in summary.error for cause in causes), detail
    assert "reward" not in summary.reward_breakdown, detail


@pytest.fixture
def dead_engine(renderer: Renderer) -> Iterator[CaptureServer]:
    """A capture server whose vLLM engine drops every connection without a reply (an outage)."""
    with FaultProxy("http://127.0.0.1:9") as faults:  # never reached: every request is dropped
        faults.set("down")
        with CaptureServer(backend=VLLMBackend(faults.url, timeout=10), renderer=renderer) as server:
            yield server


def test_an_engine_outage_is_an_error_not_a_reward_of_zero(
    fake_harness: str, dead_engine: CaptureServer, no_leftover_processes: None
) -> None:
    """`openenv run --backend vllm` with nothing listening used to be status failed, reward 0, `scored`."""
    env = HarnessEnvironment(fake_harness, server=dead_engine)
    try:
        obs, summary = run_episode(env, _task("exit3"), policy="sample")
    finally:
        env.close()
    _is_error(summary, "failed on our side", "BackendUnavailable")
    assert obs.reward is None and obs.reward_status == "error"
    assert summary.harness_status == "failed", "the harness's own status is kept apart"


def test_training_masks_an_outage_instead_of_learning_a_zero(
    fake_harness: str, dead_engine: CaptureServer, no_leftover_processes: None
) -> None:
    result = run_training_episode(
        lambda name: HarnessEnvironment(name, server=dead_engine), fake_harness, _task("exit3")
    )
    assert result.status == "error" and result.failed and result.error is not None
    assert result.error.startswith("error: the model request failed on our side"), result.error


def test_a_sandbox_that_cannot_start_is_an_error(fake_harness: str, capture_server: Any) -> None:
    def no_sandbox(ports: tuple[int, ...]) -> Any:
        raise EnvError("no space left for the episode's folder")

    env = HarnessEnvironment(
        fake_harness, server=capture_server, hooks=EpisodeHooks(sandbox_factory=no_sandbox)
    )
    obs, summary = run_episode(env, _task("exit3"))
    _is_error(summary, "could not start", "EnvError", "no space left")


def test_a_harness_that_dies_before_its_first_request_is_an_error(
    fake_harness: str,
    capture_server: Any,
    no_leftover_processes: None,
) -> None:
    env = HarnessEnvironment(fake_harness, server=capture_server)
    try:
        _, summary = run_episode(env, _task("exit-early"))
    finally:
        env.close()
    _is_error(summary, "before its first model request", "(failed)")
    assert summary.turns == 0


def test_a_verifier_that_crashes_is_an_error(
    fake_harness: str, capture_server: Any, no_leftover_processes: None
) -> None:
    def crashing_verifier(*args: Any, **kwargs: Any) -> Any:
        raise OSError(5, "Input/output error")

    env = HarnessEnvironment(
        fake_harness, server=capture_server, settings=SHORT, hooks=EpisodeHooks(verifier=crashing_verifier)
    )
    try:
        obs, summary = run_episode(env, _task("exit3"), policy="sample")
    finally:
        env.close()
    _is_error(summary, "verifier", "crashed", "Input/output error")
    assert summary.turns == 1 and summary.harness_status == "failed", "the policy played; the grader failed"


def test_a_verifier_past_its_timeout_is_an_error(
    fake_harness: str, capture_server: Any, no_leftover_processes: None
) -> None:
    slow = Task(
        id="fake-slow-tests",
        instruction="exit3",
        tests={"t": ""},
        solution="true",
        timeout_s=60,
        test_command='sleep 60; echo 1 > "$REWARD_DIR/reward.txt"',
        verifier_timeout_s=2,
    )
    env = HarnessEnvironment(fake_harness, server=capture_server, settings=SHORT)
    start = time.monotonic()
    try:
        _, summary = run_episode(env, slow, policy="sample")
    finally:
        env.close()
    _is_error(summary, "verifier_timeout")
    assert time.monotonic() - start < 40, "the verifier was stopped at its timeout"


def test_an_episode_the_policy_played_and_the_verifier_graded_is_scored(
    fake_harness: str,
    capture_server: Any,
    no_leftover_processes: None,
) -> None:
    """The control: the same stand-in, a live engine, a harness that exits non-zero on its own: reward 0."""
    env = HarnessEnvironment(fake_harness, server=capture_server, settings=SHORT)
    try:
        _, summary = run_episode(env, _task("exit3"), policy="sample")
    finally:
        env.close()
    assert (summary.status, summary.reward, summary.error) == ("failed", 0.0, None), summary


def _record(index: int, gap: str | None, aux: bool = False) -> Any:
    from openenv.capture.trajectory import TurnRecord

    return TurnRecord(
        id=f"t{index}",
        index=index,
        dialect="openai_chat",
        aux=aux,
        source=None,
        gap=gap,
        sequence=None,
        parent=None,
        kind=None,
        prompt_len=10,
        completion=None,
    )


@pytest.mark.parametrize(
    ("last_gap", "ours"),
    [
        ("BackendUnavailable: the engine at http://127.0.0.1:8999 is unreachable", True),
        ("EnvError: turn failed: RuntimeError: the proxy's renderer broke", True),  # a proxy error
        ("CapacityError: the engine is full", True),
        ("BadRequest: the prompt is longer than the context window", False),  # the request's own fault
        ("cancelled: the client went away before the reply", False),  # the harness hung up
        (None, False),  # answered: a transient fault before it was retried through
    ],
)
def test_which_last_gaps_are_our_side(last_gap: str | None, ours: bool) -> None:
    """The rule behind `error` for the engine and the proxy: the harness ended on a failure of ours."""
    from openenv.harness.outcome import engine_failure

    records = [
        _record(0, None),
        _record(1, "BackendUnavailable: reset by peer"),
        _record(2, last_gap),
        _record(3, None, aux=True),
    ]  # an aux turn after it does not hide the failure
    cause = engine_failure(records)
    assert (cause is not None) is ours, cause
    if ours:
        assert "2 of 3 requests failed" in cause and str(last_gap) in cause
