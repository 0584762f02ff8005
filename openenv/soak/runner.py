"""The fault soak: many short real-harness episodes, each with one injected fault, and a ledger for every request.

Each worker owns a slot: a `FaultProxy` in front of vLLM, a capture server whose backend goes through it,
and a `LedgerRelay` in front of the capture server that counts what the harness sends. Episodes run one at
a time per slot, so a slot's fault counters and ledgers belong to exactly one episode. An episode is a real
harness CLI in a `LocalSandbox`, driven by `HarnessEnvironment` with the `sample` action; one fault, drawn
from a seeded plan, is injected at its first model request:

- `upstream_down` / `upstream_slow` / `upstream_5xx`: the backend resets, stalls past its timeout, or
  answers 5xx. The harness gets its dialect's retryable error, the trajectory marks a gap, and the
  harness's own retry completes the episode (`exited`).
- `client_retry`: the relay sends the answered request again with `x-stainless-retry-count: 1`; the proxy
  must replay the same bytes and add no turn.
- `harness_killed` (SIGKILL to its process group: `crashed`), `harness_hung` (SIGSTOP: `timeout` at its
  deadline), `harness_nonzero` (the backend answers 400, a non-retryable error the harness exits 1 on:
  `failed`), `client_vanished` (`env.close()` with the turn still parked: `killed`), and `none`.

Accounting per episode: requests the harness sent (relay) = turns the proxy recorded + 401s after close
(lost > 0 means a request vanished, < 0 a duplicate); backend gaps = faults the FaultProxy injected;
no sandboxed process, sandbox folder or proxy session outlives the episode.
"""

from __future__ import annotations

import os
import queue
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any, Literal

import psutil

from openenv.capture.backends.vllm import VLLMBackend
from openenv.capture.canonical import SamplingParams
from openenv.capture.engine import EngineSpec
from openenv.capture.renderer import Renderer
from openenv.capture.server import CaptureServer
from openenv.capture.sync_session import SyncCaptureSession
from openenv.capture.trajectory import TurnRecord
from openenv.core.polling import settle
from openenv.errors import OpenEnvError
from openenv.executor.base import EpisodeExecutor, WorkerContext
from openenv.harness.environment import EpisodeHooks, HarnessEnvironment
from openenv.harness.episode_settings import EpisodeSettings
from openenv.harness.models import HarnessAction, HarnessObservation
from openenv.harness.sandbox.local import LocalSandbox
from openenv.harness.tasks import Task
from openenv.soak.faults import FaultProxy
from openenv.soak.models import (
    EXPECTED_STATUS,
    FAULT_KINDS,
    EpisodePlan,
    FaultKind,
    KindSummary,
    SoakConfig,
    SoakEpisodeResult,
    SoakReport,
    fault_plan,
    summarize,
)
from openenv.soak.relay import LedgerRelay

__all__ = [
    "EXPECTED_STATUS",
    "FAULT_KINDS",
    "EpisodePlan",
    "FaultKind",
    "KindSummary",
    "SoakConfig",
    "SoakEpisodeJob",
    "SoakEpisodeResult",
    "SoakReport",
    "fault_plan",
    "run_episode",
    "run_soak",
    "summarize",
]

# Faults that must each leave exactly one backend gap in the trajectory.
_BACKEND_FAULTS = ("upstream_down", "upstream_slow", "upstream_5xx", "harness_nonzero")
_CLOSED_GAP = "UnknownSession"

# The soak tests the plumbing, not the model: a reply ends at its first token that holds one of these
# (nearly every token does), so each sampled turn is a few tokens, ends with finish=stop, and the harness
# finishes its episode cleanly after one turn. vLLM takes at most four stop strings.
SOAK_SAMPLING = SamplingParams(max_tokens=16, temperature=1.0, stop=(" ", "e", "t", "a"))
SOAK_TASK = Task(
    id="soak-reply",
    instruction="Reply with one word.",
    workspace={"README.md": "soak\n"},
    tests={"test.sh": 'test -f "$WORKSPACE/README.md"\n'},
    solution="true",
    timeout_s=120,
)
_SAMPLE = HarnessAction(kind="sample")


# ---- one worker's servers ---------------------------------------------------------------------------------


class _SoakServer(CaptureServer):
    """A capture server reached through a relay, which remembers the last session it opened."""

    last: SyncCaptureSession | None = None

    def open_session(self, **kwargs: Any) -> SyncCaptureSession:
        session = super().open_session(**kwargs)
        self.last = session
        return session

    def route_through(self, relay: LedgerRelay) -> None:
        """Hand harnesses the relay's port: new sessions' base URLs and the sandbox's forwarded port use it."""
        self.port = relay.port


class _Slot:
    """FaultProxy -> vLLM, a capture server on it, and a relay in front: one episode at a time."""

    def __init__(self, config: SoakConfig, vllm_url: str, renderer: Renderer) -> None:
        self.faults = FaultProxy(vllm_url).start()
        backend = VLLMBackend(self.faults.url, timeout=config.backend_timeout_s)
        _ = backend.context_window  # discover now, so every later backend request is a turn's
        self.server = _SoakServer(backend=backend, renderer=renderer).start()
        self.relay = LedgerRelay(self.server.port).start()
        self.server.route_through(self.relay)
        self.sandbox: LocalSandbox | None = None
        self._network: Literal["host", "loopback"] = "loopback"

    def make_sandbox(self, ports: tuple[int, ...]) -> LocalSandbox:
        """An isolated sandbox with a loopback-only network; a machine that cannot make one is refused
        (`EnvError` naming the missing piece), never silently given the host network."""
        self.sandbox = LocalSandbox(network=self._network, forward_ports=ports)
        return self.sandbox

    def close(self) -> None:
        self.server.stop()
        self.relay.stop()
        self.faults.stop()


# ---- one episode ------------------------------------------------------------------------------------------


def _harness_root(sandbox: LocalSandbox) -> int | None:
    """The harness's root process: our child that carries the sandbox's marker."""
    marked = set(sandbox.leftover_pids())
    return next((p.pid for p in psutil.Process().children() if p.pid in marked), None)


def _signal_harness(sandbox: LocalSandbox, sig: signal.Signals) -> str | None:
    root = _harness_root(sandbox)
    if root is None:
        return f"no harness process to send {sig.name} to"
    try:
        os.killpg(root, sig)  # the sandbox starts each harness in its own session: pgid == pid
    except ProcessLookupError:
        return f"the harness had already exited before {sig.name}"
    return None


def _inject(
    plan: EpisodePlan, env: HarnessEnvironment, slot: _Slot, token: str, config: SoakConfig
) -> str | None:
    """Arm or apply the episode's fault while its first model request is parked; a problem, or None."""
    assert slot.sandbox is not None
    match plan.kind:
        case "none":
            return None
        case "upstream_down":
            slot.faults.set("down", count=1)
        case "upstream_slow":
            slot.faults.set("slow", count=1, delay_s=config.backend_timeout_s + 2)
        case "upstream_5xx" | "harness_nonzero":
            slot.faults.set("error", count=1, status=plan.status_code)
        case "client_retry":
            slot.relay.replay_next(token)
        case "harness_killed":
            return _signal_harness(slot.sandbox, signal.SIGKILL)
        case "harness_hung":
            return _signal_harness(slot.sandbox, signal.SIGSTOP)
        case "client_vanished":
            env.close()
    return None


def _drive(
    plan: EpisodePlan, env: HarnessEnvironment, slot: _Slot, config: SoakConfig, result: SoakEpisodeResult
) -> SyncCaptureSession | None:
    """Reset, inject, step until done; the episode's session (None if reset failed before one opened)."""
    before = slot.server.last
    timeout = config.hang_timeout_s if plan.kind == "harness_hung" else config.episode_timeout_s
    obs: HarnessObservation | None = env.reset(task=SOAK_TASK, timeout_s=timeout)
    session = slot.server.last if slot.server.last is not before else None
    assert obs is not None and session is not None
    if obs.done:
        result.problems.append("the harness ended before its first model request")
    else:
        problem = _inject(plan, env, slot, session.token, config)
        if problem:
            result.problems.append(problem)
        if plan.kind == "client_vanished":
            obs = None
    while obs is not None and not obs.done and result.steps < config.max_steps:
        obs = env.step(_SAMPLE)
        result.steps += 1
    if obs is not None and not obs.done:
        result.problems.append(f"not done after {config.max_steps} steps")
    if obs is not None:
        result.output_tail = obs.output_tail[-600:]
    return session


def _settled_turns(session: SyncCaptureSession, wait_s: float = 3.0) -> list[TurnRecord]:
    """The session's turns once none is still open (a parked turn fails just after its session closes)."""
    return settle(
        session.turns, lambda turns: all(t.completion is not None or t.gap is not None for t in turns), wait_s
    )


def _account(
    result: SoakEpisodeResult,
    slot: _Slot,
    session: SyncCaptureSession,
    env: HarnessEnvironment,
    faults_before: dict[str, int],
) -> None:
    turns = _settled_turns(session)
    ledger = slot.relay.settled_ledger(session.token)
    result.gaps_backend = sum(1 for t in turns if t.gap and not t.gap.startswith(_CLOSED_GAP))
    result.gaps_closed = sum(1 for t in turns if t.gap and t.gap.startswith(_CLOSED_GAP))
    result.gap_reasons = [t.gap[:160] for t in turns if t.gap]
    # A parked turn failed at close is answered 401 too; the rest of the 401s never became a turn.
    result.posts, result.refused, result.turns = (
        ledger.posts,
        ledger.statuses[401] - result.gaps_closed,
        len(turns),
    )
    after = slot.faults.stats
    result.faults_hit = _faults_total(after) - _faults_total(faults_before)
    timeouts = sum(1 for t in turns if t.gap and "ReadTimeout" in t.gap)
    result.backend_timeouts = max(0, timeouts - (after["slow"] - faults_before["slow"]))
    result.replays, result.replays_identical = ledger.replays_sent, ledger.replays_identical
    result.problems.extend(ledger.replay_problems)
    balance = ledger.posts - result.refused - len(turns)
    result.lost_turns, result.duplicate_turns = max(balance, 0), max(-balance, 0)
    seen = {t.id for t in env.trajectory()}
    result.env_missing_turns = sum(1 for t in turns if t.id not in seen)
    if ledger.relay_errors:
        result.problems.append(
            f"{ledger.relay_errors} request(s) never reached the proxy "
            f"({'; '.join(ledger.relay_error_reasons)})"
        )
    if slot.relay.disarm(session.token):
        result.problems.append("the injected client retry never fired")
    result.session_left_open = session.token in slot.server.registry.sessions


def _check_leaks(result: SoakEpisodeResult, sandbox: LocalSandbox | None) -> None:
    if sandbox is None:
        return
    leaked = sandbox.leftover_pids()
    if leaked:  # close() waits for every kill; anything still here is either slow to die or a leak
        result.slow_cleanup = True
        time.sleep(2)
        leaked = sandbox.leftover_pids()
    result.leaked_pids = leaked
    result.leaked_dir = sandbox.root.exists()


def _judge(result: SoakEpisodeResult) -> None:
    """Compare the outcome with what the fault must produce."""
    p = result.problems
    if result.status != result.expected_status:
        p.append(f"status {result.status}, expected {result.expected_status}")
    if result.lost_turns or result.duplicate_turns or result.env_missing_turns:
        p.append(
            f"lost {result.lost_turns}, duplicated {result.duplicate_turns}, "
            f"missing from the env's trajectory {result.env_missing_turns}"
        )
    if result.gaps_backend != result.faults_hit + result.backend_timeouts:
        p.append(
            f"{result.gaps_backend} backend gap(s) for {result.faults_hit} injected fault(s) and "
            f"{result.backend_timeouts} real backend timeout(s): {result.gap_reasons}"
        )
    if result.kind in _BACKEND_FAULTS and result.faults_hit != 1:
        p.append(f"the injected {result.kind} hit {result.faults_hit} requests, expected 1")
    if result.kind == "client_retry" and result.replays_identical != 1:
        p.append(f"{result.replays_identical} identical replay(s) of 1 retry")
    if result.kind == "client_vanished" and result.gaps_closed != 1:
        p.append(f"{result.gaps_closed} turn(s) failed at close, expected the 1 parked")
    if result.leaked_pids or result.leaked_dir or result.session_left_open:
        p.append(
            f"leaked: pids {result.leaked_pids}, dir {result.leaked_dir}, session {result.session_left_open}"
        )


def run_episode(plan: EpisodePlan, slot: _Slot, config: SoakConfig) -> SoakEpisodeResult:
    """One episode with its fault, accounted and judged; never raises for the episode's own failures."""
    start = time.monotonic()
    result = SoakEpisodeResult(
        index=plan.index, kind=plan.kind, expected_status=EXPECTED_STATUS[plan.kind], status=None
    )
    slot.sandbox = None
    faults_before = slot.faults.stats
    env = HarnessEnvironment(
        config.harness,
        server=slot.server,
        settings=EpisodeSettings(sampling=SOAK_SAMPLING, turn_timeout_s=config.episode_timeout_s),
        hooks=EpisodeHooks(sandbox_factory=slot.make_sandbox),
    )
    session = None
    try:
        session = _drive(plan, env, slot, config, result)
    except (OpenEnvError, AssertionError, OSError) as exc:
        result.problems.append(f"{type(exc).__name__}: {getattr(exc, 'message', exc)}")
    finally:
        env.close()
        slot.faults.set("pass")
    result.status = env.state.harness_status
    if session is not None:
        _account(result, slot, session, env, faults_before)
    _check_leaks(result, slot.sandbox)
    _judge(result)
    result.wall_s = round(time.monotonic() - start, 2)
    return result


def _faults_total(stats: dict[str, int]) -> int:
    return stats["down"] + stats["slow"] + stats["error"]


# ---- the whole soak ---------------------------------------------------------------------------------------


def _process_figures() -> tuple[float, int, int, set[int]]:
    me = psutil.Process()
    return (
        me.memory_info().rss / 2**20,
        me.num_threads(),
        me.num_fds(),
        {c.pid for c in me.children(recursive=True)},
    )


def run_soak(
    config: SoakConfig,
    engine: EngineSpec,
    *,
    on_result: Callable[[SoakEpisodeResult], None] | None = None,
    executor: EpisodeExecutor | None = None,
) -> SoakReport:
    """Run the plan on `config.concurrency` slots against the engine's (first) vLLM; the accounted report.

    Args:
        engine: a `vllm` engine; its folder (default: the tiny model vLLM serves) renders the prompts.
        on_result: called with each episode's result as it finishes (from worker threads).
        executor: run the episodes there instead (`RayExecutor`: one slot per Ray worker, each with
            its own fault proxy, capture server and relay on its node); the process figures (RSS,
            threads, fds, children) are then the driver's, and leaks are checked per episode there.
    """

    rss0, threads0, fds0, children0 = _process_figures()
    start = time.monotonic()
    if executor is not None:
        results = _run_on(executor, config, engine, on_result)
        rss1, threads1, fds1, _ = _process_figures()
        return summarize(
            config,
            sorted(results, key=lambda r: r.index),
            wall_s=time.monotonic() - start,
            start=(rss0, threads0, fds0),
            end=(rss1, threads1, fds1),
            leaked_children=0,
        )
    engine.check()
    renderer = Renderer.from_pretrained(engine.folder())
    todo: queue.SimpleQueue[EpisodePlan] = queue.SimpleQueue()
    for plan in fault_plan(config):
        todo.put(plan)
    results: list[SoakEpisodeResult] = []
    lock = threading.Lock()

    def worker() -> None:
        slot = _Slot(config, engine.vllm_urls[0], renderer)
        try:
            while True:
                try:
                    plan = todo.get_nowait()
                except queue.Empty:
                    return
                result = run_episode(plan, slot, config)
                with lock:
                    results.append(result)
                if on_result is not None:
                    on_result(result)
        finally:
            slot.close()

    with ThreadPoolExecutor(config.concurrency, thread_name_prefix="soak") as pool:
        for future in [pool.submit(worker) for _ in range(config.concurrency)]:
            future.result()
    wall = time.monotonic() - start
    rss1, threads1, fds1, children1 = _process_figures()
    leaked_children = len({pid for pid in children1 - children0 if _alive(pid)})
    return summarize(
        config,
        sorted(results, key=lambda r: r.index),
        wall_s=wall,
        start=(rss0, threads0, fds0),
        end=(rss1, threads1, fds1),
        leaked_children=leaked_children,
    )


@dataclass(frozen=True)
class SoakEpisodeJob:
    """One soak episode as an executor job; the worker keeps one slot (fault proxy, proxy, relay) for all
    the soak episodes it runs, as a soak thread does."""

    plan: EpisodePlan
    config: SoakConfig
    engine: EngineSpec

    @property
    def label(self) -> str:
        return f"soak/{self.plan.index}/{self.plan.kind}"

    def run(self, context: WorkerContext) -> SoakEpisodeResult:
        key = f"soak-slot:{self.engine}:{self.config.model_dump_json()}"
        slot = context.cache.get(key)
        if slot is None:
            renderer = Renderer.from_pretrained(self.engine.folder())
            slot = context.cache[key] = _Slot(self.config, self.engine.vllm_urls[0], renderer)
        return run_episode(self.plan, slot, self.config)

    def lost(self, reason: str) -> SoakEpisodeResult:
        plan = self.plan
        return SoakEpisodeResult(
            index=plan.index,
            kind=plan.kind,
            expected_status=EXPECTED_STATUS[plan.kind],
            status=None,
            problems=[reason],
        )


def _run_on(
    executor: EpisodeExecutor,
    config: SoakConfig,
    engine: EngineSpec,
    on_result: Callable[[SoakEpisodeResult], None] | None,
) -> list[SoakEpisodeResult]:
    futures = [executor.submit(SoakEpisodeJob(plan, config, engine)) for plan in fault_plan(config)]
    results = []
    for future in as_completed(futures):
        result = future.result()
        results.append(result)
        if on_result is not None:
            on_result(result)
    return results


def _alive(pid: int) -> bool:
    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False
