"""HarnessEnvironment: a real harness CLI on a task, as a Gym-style environment. A step is one model turn.

`reset` makes a sandbox with the task's workspace, opens a gated capture session, starts the harness
headless and returns at its first model request. Each `step` says who answers that request (`sample`,
`complete` or `run`) and returns at the next one, or at the end, when the verifier scores the workspace
and the session's training sequences come back with the reward.
"""

from __future__ import annotations

import contextlib
import random
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from openenv.capture.budget import Budget
from openenv.capture.engine import EngineSpec, shared_capture_server
from openenv.capture.renderer import Renderer
from openenv.capture.server import CaptureServer
from openenv.capture.session import SyncPendingTurn
from openenv.capture.sync_session import SyncCaptureSession
from openenv.capture.trajectory import Trajectory, TurnRecord
from openenv.core.environment import Environment, EnvMetadata
from openenv.core.validation import validation_message
from openenv.errors import BadRequest, EnvError, InvalidAction, OpenEnvError
from openenv.harness.catalog import get_spec
from openenv.harness.episode_settings import (
    DEFAULT_SAMPLING,
    EpisodeSettings,
    SandboxKind,
)
from openenv.harness.launch import launch
from openenv.harness.models import HarnessAction, HarnessObservation, HarnessState, LastTurn, PendingTurnView
from openenv.harness.outcome import episode_error
from openenv.harness.sandbox.base import HarnessProcess, Sandbox
from openenv.harness.sandbox.local import LocalSandbox
from openenv.harness.spec import HarnessSpec, SessionContext
from openenv.harness.tasks import Task, builtin_task, builtin_task_ids, find_task, load_task_set
from openenv.harness.tasks.sets import served_task_sets
from openenv.harness.verifier import Verdict, verify

__all__ = [
    "DEFAULT_SAMPLING",
    "EpisodeHooks",
    "EpisodeSettings",
    "HarnessEnvironment",
    "ResetOptions",
    "SandboxKind",
    "stage_workspace",
]

SandboxFactory = Callable[[tuple[int, ...]], Sandbox]
# How often a step waiting for the harness's next request looks again without being woken: a safety net.
# The harness's exit wakes it at once (`_nudge_on_exit`); it polled every 0.2 s, 0.1 s of every episode.
ADVANCE_POLL_S = 1.0


@dataclass
class _Episode:
    task: Task
    sandbox: Sandbox
    session: SyncCaptureSession
    process: HarnessProcess
    verifier: Callable[..., Verdict] = verify
    pending: SyncPendingTurn | None = None
    last_turn: LastTurn | None = None
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    records: list[TurnRecord] = field(default_factory=list)
    # The last observed prompt's ids and text: the next prompt extends it (`Renderer.decode_extending`).
    decoded: tuple[list[int], str] | None = None
    # Set by close() from another thread (a served env whose client vanished mid-step): the step stops.
    aborted: bool = False
    released: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)


class ResetOptions(BaseModel):
    """`reset()` options, validated up front: a bad value over the wire is a 400 naming the option, not
    an `EnvError` from deep in the episode (schemathesis found `timeout_s="abc"` and `task=123` as 500s)."""

    model_config = ConfigDict(extra="forbid")

    # A built-in task id (a folder name: no path separators, no leading dot), a Task or a Task dict.
    task: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")] | Task | None = None
    # Where a task id is looked up: `builtin` (default) or a set the server's operator offers
    # ($OPENENV_TASK_SETS, `openenv serve --task-set`); over the wire only those.
    task_set: str | None = None
    timeout_s: float | None = Field(default=None, gt=0)
    sandbox: SandboxKind | None = None
    # The oracle's episode: the task's solution/ folder is staged read-only at /solution before the
    # harness starts (Harbor's oracle agent uploads it the same way). Never set for a policy being trained.
    stage_solution: bool = False
    # Who will answer this episode's turns, as a trainer or a reference client names it beside the task:
    # `oracle` stages the solution (as `stage_solution`); the others change nothing in the episode.
    policy: Literal["sample", "complete", "run", "oracle"] | None = None
    budget: Budget | None = None

    @field_validator("sandbox", mode="before")
    @classmethod
    def _known_sandbox(cls, kind: object) -> object:
        if kind is not None and kind not in ("local", "docker"):
            raise ValueError(f"sandbox must be 'local' or 'docker', got {kind!r}")
        return kind


def _reset_options(options: dict[str, Any]) -> ResetOptions:
    try:
        return ResetOptions.model_validate(options)
    except ValidationError as exc:
        known = ", ".join(ResetOptions.model_fields)
        raise BadRequest(f"{validation_message(exc, 'reset option')} (known options: {known})") from None


def _nudge_on_exit(process: HarnessProcess, session: SyncCaptureSession, timeout_s: float) -> None:
    """Wake the step waiting on `session` as soon as the harness exits (its watchdog ends it by
    `timeout_s`), so an episode is graded the moment its harness is done, not at the next poll."""
    process.wait(timeout_s + 30.0)
    with contextlib.suppress(RuntimeError):  # the server's loop is gone: nobody is waiting
        session.nudge()


def _check_live(episode: _Episode) -> None:
    if episode.aborted:
        raise EnvError("the episode was closed while this step ran (the env was closed or its client left)")


def stage_workspace(sandbox: Sandbox, task: Task) -> None:
    """The task's starting files at the workdir, executable where the task folder has them so (as COPY does)."""
    sandbox.stage(sandbox.workdir, dict(task.workspace), readonly=False)
    for relative in task.executables:
        sandbox.host_path(f"{sandbox.workdir}/{relative}").chmod(0o755)


def _stage_solution(sandbox: Sandbox, task: Task) -> None:
    """Put the task's solution/ folder at /solution (read-only) for the oracle; refuse a task without one."""
    if task.solution is None:
        raise BadRequest(f"task {task.id!r} has no solution/solve.sh, so the oracle cannot solve it")
    sandbox.stage("/solution", dict(task.solution_files or {"solve.sh": task.solution}), readonly=True)


@dataclass(frozen=True)
class EpisodeHooks:
    """Code an episode calls instead of the defaults (not settings: functions do not travel in a config).

    Args:
        sandbox_factory: builds each episode's sandbox from the proxy ports it must reach; it replaces
            the settings' `sandbox` (for custom images or limits).
        verifier: `verify(sandbox, task, tool_calls=, rule=)` or a drop-in (e.g. `verify_isolated`).
    """

    sandbox_factory: SandboxFactory | None = None
    verifier: Callable[..., Verdict] | None = None


class HarnessEnvironment(Environment[HarnessAction, HarnessObservation, HarnessState]):
    """One harness (envs/<name>/spec.yaml) solving one task per episode, through the capture proxy.

    Args:
        harness: the harness name; subclasses in envs/<name>/ set the `harness` class attribute instead.
        engine: which engine samples and which model folder renders (`capture.engine.EngineSpec`); None:
            the engine the process's environment names, `EngineSpec.of()` ($OPENENV_BACKEND, else the
            in-process tiny model), resolved at the first reset: a served env (`openenv serve`, an env
            image, a Space) is built with no arguments and configured by its environment
            (openenv/harness/env_image.py).
        server: a started `CaptureServer` to share (its engine is the one used); without one, the
            process's server for `engine` (`capture.engine.shared_capture_server`) is used from the first
            reset: one model load, many sessions.
        settings: how each episode runs (`EpisodeSettings`: sandbox, network, isolation, sampling, reward
            rule, timeouts, budget, image substitutes); what every road into an episode passes.
        hooks: functions that replace the sandbox factory or the verifier (`EpisodeHooks`).
    """

    action_type = HarnessAction
    observation_type = HarnessObservation
    state_type = HarnessState
    # Set in envs/<name>/ subclasses: the harness this environment runs.
    harness: ClassVar[str | None] = None

    def __init__(
        self,
        harness: str | None = None,
        *,
        engine: EngineSpec | None = None,
        server: CaptureServer | None = None,
        settings: EpisodeSettings | None = None,
        hooks: EpisodeHooks | None = None,
    ) -> None:
        name = harness or type(self).harness
        if name is None:
            raise BadRequest("HarnessEnvironment needs a harness name (e.g. harness='pi')")
        self.spec: HarnessSpec = get_spec(name)
        self._server = server
        self._engine = engine
        self.settings: EpisodeSettings = settings if settings is not None else EpisodeSettings()
        self.hooks: EpisodeHooks = hooks if hooks is not None else EpisodeHooks()
        self._episode: _Episode | None = None
        self._state = HarnessState(harness=name)

    @property
    def engine(self) -> EngineSpec:
        """The engine given, else the one the environment names (`EngineSpec.of()`), fixed on first use."""
        if self._engine is None:
            self._engine = EngineSpec.of()
        return self._engine

    # ---- Environment API --------------------------------------------------------------------------

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **options: Any
    ) -> HarnessObservation:
        """Start an episode and return at the harness's first model request.

        Options (keyword arguments, as the reference OpenEnv's clients pass them over the wire):
            task: a built-in task id, a `Task`, or a Task dict; default: a built-in task picked by `seed`.
            task_set: where `task` is looked up (`builtin`, or a set the server offers).
            policy: who answers the turns (`sample`, `complete`, `run`, `oracle`); `oracle` stages the
                solution at /solution.
            timeout_s: the harness's wall-clock budget (default: the task's).
            sandbox: `local` or `docker` for this episode (default: the constructor's).
            budget: caps for this episode, combined with the constructor's and the task's.
        """
        self._end_episode()
        opts = _reset_options(options)
        task = self._resolve_task(opts.task, seed, opts.task_set)
        timeout_s = opts.timeout_s or self.settings.timeout_s or task.timeout_s
        notes: list[str] = []
        make_sandbox, verifier = self._sandbox_parts(opts.sandbox or self.settings.sandbox, task, notes)
        server = self._ensure_server()
        sandbox = make_sandbox((server.port,))
        session = server.open_session(
            mode="gated",
            sampling=self.settings.sampling,
            sampling_policy=self.settings.sampling_policy,
            aux=lambda req: self.spec.aux_reason(req) is not None,
        )
        session.set_budget(
            Budget().tightest(task.budget).tightest(self.settings.budget).tightest(opts.budget)
        )
        try:
            if not getattr(sandbox, "workspace_ready", False):  # a built image already laid it out
                stage_workspace(sandbox, task)
            if opts.stage_solution or opts.policy == "oracle":
                _stage_solution(sandbox, task)
            ctx = SessionContext(
                base_url=session.base_url,
                api_key=session.token,
                model=self.spec.model,
                workspace=Path(sandbox.workdir),
                home=sandbox.home,
                instruction=task.instruction,
            )
            process = launch(self.spec, sandbox, ctx, timeout_s=timeout_s, task_env=task.env)
            threading.Thread(
                target=_nudge_on_exit, args=(process, session, timeout_s), name="harness-exit", daemon=True
            ).start()
        except BaseException:
            server.close_session(session.token)
            sandbox.close()
            raise
        self._episode = _Episode(
            task=task, sandbox=sandbox, session=session, process=process, verifier=verifier, notes=notes
        )
        self._state = HarnessState(
            episode_id=episode_id or uuid.uuid4().hex,
            harness=self.spec.name,
            task_id=task.id,
            status="waiting",
            harness_status="running",
        )
        return self._advance()

    def step(self, action: HarnessAction) -> HarnessObservation:
        """Answer the pending model request and return at the next one (or at the end).

        Raises:
            InvalidAction: there is no episode in progress (reset first).
        """
        episode = self._episode
        if episode is None or self._state.status != "waiting":
            raise InvalidAction("no episode is in progress; call reset() first")
        self._state.step_count += 1
        if action.kind == "run":
            episode.session.run()  # samples whatever is parked now and every later request
            if episode.pending is not None and not episode.pending.resolved:
                self._answer(episode, HarnessAction(kind="sample"))
            episode.process.wait(None)  # the sandbox's deadline bounds this
            return self._finish()
        self._answer(episode, action)
        return self._advance()

    @property
    def state(self) -> HarnessState:
        return self._state

    def close(self) -> None:
        self._end_episode()

    @classmethod
    def metadata(cls) -> EnvMetadata:
        name = cls.harness or "harness"
        return EnvMetadata(name=name, description=f"{name} solving a coding task, one model turn per step")

    @classmethod
    def check_wire_reset(cls, options: dict[str, Any], *, allow_inline_tasks: bool) -> None:
        """Over the wire a task is named by id; a whole task (its test command runs in the sandbox, as
        whoever runs the server) only when the server allows inline tasks (`--allow-inline-tasks`)."""
        task = options.get("task")
        if task is not None and not isinstance(task, str) and not allow_inline_tasks:
            raise BadRequest(
                "reset option 'task' must be a task id of this server's task set (an inline task "
                "runs its own commands); start the server with --allow-inline-tasks to accept them"
            )
        task_set = options.get("task_set")
        if task_set is not None and task_set not in served_task_sets() and not allow_inline_tasks:
            raise BadRequest(
                f"reset option 'task_set' {task_set!r} is not one this server offers "
                f"({', '.join(served_task_sets())}); its operator adds sets with --task-set"
            )

    def trajectory(self) -> list[TurnRecord]:
        """Every turn of the current (or last) episode, aux turns included, for saving as JSONL."""
        episode = self._episode
        if episode is None:
            return []
        return episode.records or episode.session.turns()

    def capture_record(self) -> tuple[Trajectory, Renderer] | None:
        """The current (or last) episode's capture record, live: its training sequences with the messages
        each sequence's newest request carried (the harness's echo of the model's replies), and the
        renderer that made its prompts; None before the first episode. For analyses that need the
        conversation as the harness sent it (`openenv.train.naive`); the rows themselves are in the
        observation."""
        episode = self._episode
        if episode is None:
            return None
        return episode.session.trajectory, self._ensure_server().registry.renderer

    # ---- internals ----------------------------------------------------------------------------------

    def _local_sandbox(self, ports: tuple[int, ...], workdir: str = "/app") -> Sandbox:
        isolation = self.settings.isolation_in_effect()
        if isolation == "container":
            from openenv.harness.sandbox.container import ContainerSandbox

            return ContainerSandbox(forward_ports=ports, workdir=workdir)
        network = self.settings.network_in_effect()
        return LocalSandbox(network=network, forward_ports=ports, workdir=workdir, isolation=isolation)

    def _sandbox_parts(
        self, kind: SandboxKind, task: Task, notes: list[str]
    ) -> tuple[SandboxFactory, Callable[..., Verdict]]:
        """The episode's sandbox factory and grader.

        Docker runs the task's own image (built from environment/ where it must be) and grades in the
        episode's container (Harbor's shared mode) or a fresh one (`environment_mode = "separate"`).
        The local sandbox refuses a task only an image build reproduces, unless told otherwise.
        """
        settings, verifier = self.settings, self.hooks.verifier
        if self.hooks.sandbox_factory is not None:
            return self.hooks.sandbox_factory, verifier or verify
        substitutes = dict(settings.image_substitutes)
        if kind == "docker":
            from openenv.harness.sandbox.docker_episode import sandbox_factory, verify_isolated

            grader = verify_isolated if task.verifier_mode == "separate" else verify
            docker = sandbox_factory(task, substitutes=substitutes, notes=notes, pull=settings.pull)
            return docker, verifier or grader
        without_build = settings.local_without_build_in_effect()
        isolation = settings.isolation_in_effect()
        if (task.image or (task.needs_build() and not without_build)) and isolation == "bwrap":
            # the task's own image, fetched (or built) and unpacked, no daemon to run it
            from openenv.harness.sandbox.local_image import local_image_factory, stderr_progress
            from openenv.harness.sandbox.rootfs import RootfsCache

            cache = RootfsCache(policy=settings.pull, progress=stderr_progress)
            network = settings.network_in_effect()
            factory = local_image_factory(
                task, cache=cache, substitutes=substitutes, notes=notes, network=network, isolation=isolation
            )
            return factory, verifier or verify
        if task.needs_build() or task.image:
            what = (
                task.build_steps[:2]
                + [f"files outside {task.workdir}: {', '.join(task.outside_files[:3])}"]
                * bool(task.outside_files)
                + [f"docker_image {task.image}"] * bool(task.image)
            )
            if not without_build:
                raise BadRequest(
                    f"task {task.id!r} needs an image build the local sandbox cannot reproduce ({'; '.join(what)}). "
                    "Run it with --sandbox docker, or opt in to running it without those steps with "
                    "OPENENV_LOCAL_WITHOUT_BUILD=1 (EpisodeSettings(local_without_build=True))"
                )
            notes.append(f"local sandbox without the image build: skipped {'; '.join(what)}")
        return partial(self._local_sandbox, workdir=task.workdir), verifier or verify

    def _resolve_task(self, task: str | Task | None, seed: int | None, task_set: str | None = None) -> Task:
        if isinstance(task, Task):
            return task
        if task_set not in (None, "builtin"):
            if task is None:
                return random.Random(seed).choice(load_task_set(task_set))
            return find_task(task, task_set)
        if task is None:
            task = random.Random(seed).choice(builtin_task_ids())
        return builtin_task(task)

    def _ensure_server(self) -> CaptureServer:
        if self._server is None:
            self._server = shared_capture_server(self.engine)
        return self._server

    def _answer(self, episode: _Episode, action: HarnessAction) -> None:
        pending = episode.pending
        assert pending is not None
        episode.pending = None
        try:
            if action.kind == "sample":
                done = pending.sample(timeout=self.settings.turn_timeout_s)
            else:
                done = pending.complete(
                    text=action.text, token_ids=action.token_ids, timeout=self.settings.turn_timeout_s
                )
        except OpenEnvError as exc:  # the harness got a retryable error; the trajectory marks the gap
            episode.errors.append(f"{type(exc).__name__}: {exc.message}")
            return
        episode.last_turn = LastTurn(
            turn_id=done.id,
            text=done.text,
            reasoning=done.reasoning,
            tool_calls=list(done.tool_calls),
            token_ids=list(done.token_ids),
            logprobs=list(done.logprobs),
            finish_reason=done.finish_reason,
        )

    def _advance(self) -> HarnessObservation:
        """Wait for the harness's next model request, or for it to end."""
        episode = self._episode
        assert episode is not None
        while True:
            _check_live(episode)
            pending = episode.session.next_pending(timeout=ADVANCE_POLL_S)
            running = episode.process.status() == "running"
            if pending is not None and running:
                episode.pending = pending
                return self._observe(episode, pending)
            if pending is not None:
                pending.fail("the harness has exited")
            if not running:
                return self._finish()

    def _counts(self, records: list[TurnRecord]) -> tuple[int, int]:
        main = [r for r in records if not r.aux and r.completion is not None and not r.budget]
        return len(main), sum(len(r.completion.tool_calls) for r in main if r.completion is not None)

    def _observe(self, episode: _Episode, pending: SyncPendingTurn) -> HarnessObservation:
        turns, tool_calls = self._counts(episode.session.turns())
        self._state.harness_status = episode.process.status()
        prompt_ids = list(pending.prompt_ids)
        text = self._ensure_server().registry.renderer.decode_extending(prompt_ids, episode.decoded)
        episode.decoded = (prompt_ids, text)
        return HarnessObservation(
            pending=PendingTurnView(
                turn_id=pending.id,
                dialect=pending.dialect,
                request=pending.request,
                prompt_ids=prompt_ids,
                aux=pending.aux,
                text=text,
            ),
            last_turn=episode.last_turn,
            turns=turns,
            tool_calls=tool_calls,
            harness_status=self._state.harness_status,
            output_tail=episode.process.output_tail(1000),
            metadata={"errors": list(episode.errors)} if episode.errors else {},
        )

    def _finish(self) -> HarnessObservation:
        """Score the workspace, collect the sequences, and release the sandbox and the session."""
        episode = self._episode
        assert episode is not None
        _check_live(episode)
        episode.process.wait(10)
        status = episode.process.status()
        tail = episode.process.output_tail(2000)
        # The session closes before grading: the tests run the agent's code, which knows the session's
        # URL and token; a turn it sent now would join the trajectory the reward is paid to.
        self._close_session(episode)
        records = episode.session.turns()
        turns, tool_calls = self._counts(records)
        try:
            verdict: Verdict = episode.verifier(
                episode.sandbox,
                episode.task,
                tool_calls=tool_calls,
                rule=self.settings.reward_rule_in_effect(),
            )
        except Exception as exc:
            verdict = Verdict(
                reward=None,
                status="verifier_error",
                reason=f"the verifier crashed: {type(exc).__name__}: {getattr(exc, 'message', exc)}",
                tool_calls=tool_calls,
            )
        rows, stats = episode.session.sequences(), episode.session.stats()
        episode.records = records
        self._release(episode)
        self._state.status, self._state.harness_status = "done", status
        # Only a verdict on an episode the policy really played is a reward (openenv/harness/outcome.py).
        error = episode_error(status, records, tail, verdict.status, verdict.reason)
        metadata: dict[str, Any] = {
            "verifier_output": verdict.output_tail[-2000:],
            "errors": episode.errors,
            "notes": episode.notes,
        }
        if error is not None:
            metadata["error"] = error
        breakdown = {k: v for k, v in verdict.breakdown().items() if error is None or k != "reward"}
        return HarnessObservation(
            done=True,
            reward=verdict.reward if error is None else None,
            last_turn=episode.last_turn,
            turns=turns,
            tool_calls=tool_calls,
            harness_status=status,
            output_tail=tail,
            reward_breakdown=breakdown,
            sequences=rows,
            reward_status=verdict.status if error is None or verdict.status != "scored" else "error",
            no_reward_reason=error if error is not None else (verdict.reason or None),
            stats=stats,
            metadata=metadata,
            budget_hit=episode.session.budget_hit,
        )

    def _release(self, episode: _Episode) -> None:
        with episode.lock:  # once, though close() and an abandoned step may both get here
            if episode.released:
                return
            episode.released = True
        self._close_session(episode)
        episode.sandbox.close()

    def _close_session(self, episode: _Episode) -> None:
        """No more turns into the episode's session (its trajectory stays readable); idempotent."""
        if self._server is not None and not episode.session.closed:
            try:
                self._server.close_session(episode.session.token)
            except OpenEnvError:
                pass

    def _end_episode(self) -> None:
        """Abort an episode still in progress (reset or close before `done`).

        Safe while a step runs in another thread (the env server abandons the step of a client that
        vanished, then closes): the harness is killed and the step raises instead of grading.
        """
        episode = self._episode
        if episode is not None and self._state.status == "waiting":
            episode.aborted = True
            episode.process.kill()
            episode.records = episode.session.turns()
            self._release(episode)
            self._state.status, self._state.harness_status = "done", episode.process.status()
