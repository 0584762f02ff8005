"""A capture session: one harness run's turns, answered automatically or gated by a controller.

`CaptureSession.handle` answers one request in fixed steps: replay a retry (`replay.ReplayCache`), plan
the prompt (`planner.PromptPlanner`, pure), let the gate decide who answers (`gate.Gate`: the backend at
once, or a controller's `sample()` / `complete()` / `fail()`), generate with the context clamp, parse, and
record the turn. The session's state only ever changes on the server's own loop: its async API may be
awaited from any loop, and `SyncCaptureSession(session)` (sync_session.py) is its blocking twin for threads.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, assert_never

from openenv.capture.backends.base import Backend
from openenv.capture.budget import Budget, budget_reply_text
from openenv.capture.canonical import CanonicalRequest, Completion, SamplingParams, ToolCallPart, Usage
from openenv.capture.gate import (
    Complete,
    Decision,
    Fail,
    Gate,
    Mode,
    PendingTurn,
    Sample,
    SyncPendingTurn,
    abandon,
    on_loop,
)
from openenv.capture.journal import Journal
from openenv.capture.logprob_mode import (
    LogprobMode,
    engine_logprob_mode,
    exact_for_training,
    needs_processed,
    require_trainable_engine,
)
from openenv.capture.parsers.base import CompletionParser
from openenv.capture.parsers.spans import token_spans
from openenv.capture.planner import Plan, PromptPlanner
from openenv.capture.renderer import Renderer
from openenv.capture.replay import ReplayCache
from openenv.capture.sampling_policy import SamplingPolicy, effective_params
from openenv.capture.timing import waiting
from openenv.capture.trajectory import SequenceRow, SequenceStats, Trajectory, Turn, TurnRecord
from openenv.errors import BackendUnavailable, BadRequest, EnvError, OpenEnvError

__all__ = [
    "AuxPredicate",
    "CaptureSession",
    "Mode",
    "PendingTurn",
    "SessionBusy",
    "SyncPendingTurn",
    "TokenSink",
    "TurnCapReached",
    "TurnLimits",
]

T = TypeVar("T")
AuxPredicate = Callable[[CanonicalRequest], bool]
# Hears of a streamed turn's tokens as the engine samples them: (turn id, the reply's `created`, its prompt
# length, new ids).
TokenSink = Callable[[str, int, int, list[int]], None]


class CaptureSession:
    """One harness run's routing scope and trajectory. Create through `CaptureSessionRegistry.open`.

    The async methods may be awaited from any event loop; `sync()` gives their blocking twin.
    """

    def __init__(
        self,
        *,
        token: str,
        base_url: str,
        loop: asyncio.AbstractEventLoop,
        renderer: Renderer,
        backend: Backend,
        parser: CompletionParser,
        mode: Mode = "auto",
        sampling: SamplingParams | None = None,
        aux: AuxPredicate | None = None,
        gate_aux: bool = False,
        served_model: str = "",
        budget: Budget | None = None,
        journal: Journal | None = None,
        limits: TurnLimits | None = None,
        sampling_policy: SamplingPolicy = "trainer",
    ) -> None:
        self.token = token
        self.base_url = base_url
        self.loop = loop
        self.sampling = sampling
        # `trainer`: a model turn samples with `sampling` only, whatever the request asks (sampling_policy.py).
        self.sampling_policy: SamplingPolicy = sampling_policy
        self.trajectory = Trajectory()
        self.gate = Gate(loop, mode, gate_aux)
        self.replay = ReplayCache()
        self.planner = PromptPlanner(renderer)
        self._renderer = renderer
        self._backend = backend
        self._parser = parser
        self._aux = aux
        self._served_model = served_model
        self.closed = False
        self.budget = None if budget is None or budget.unlimited else budget
        self.budget_hit: str | None = None  # the cap that ended the episode (`budget.py`)
        self._used_turns = 0  # model turns recorded (aux excluded), for the budget
        self._used_tokens = 0
        self.journal = journal
        self.limits = limits or TurnLimits()
        self.last_active = time.monotonic()  # the idle reaper's clock
        self.count_tokens_calls = 0  # answered by the tokenizer; never stored as turns
        self._answering = 0  # requests inside handle(), which the idle reaper must not cut off

    @property
    def mode(self) -> Mode:
        """`gated` parks requests for a controller; `auto` samples them at once."""
        return self.gate.mode

    @property
    def busy(self) -> bool:
        """Whether a request is being answered now (the idle reaper must not cut the session off)."""
        return self._answering > 0

    @property
    def streamed_pieces(self) -> dict[str, tuple[tuple[str, str], ...]]:
        """Body digest -> how its streamed reply was cut into text deltas, so a replay streams the same bytes."""
        return self.replay.streamed_pieces

    # ---- controller API (async; awaitable from any loop) ----------------------------------------------

    async def next_pending(self, timeout: float | None = None) -> PendingTurn | None:
        """The next parked request, or None after `timeout` seconds."""
        return await on_loop(self.loop, self.gate.next(timeout))

    def nudge(self) -> None:
        """End a controller's `next_pending` wait now (or its next one at once), with None: the harness
        exited, so no request will come. Thread-safe."""
        self.loop.call_soon_threadsafe(self.gate.nudge)

    async def run(self) -> None:
        """Switch to auto: sample every parked and future request."""
        await on_loop(self.loop, _call(self.gate.open))

    async def sequences(self) -> list[SequenceRow]:
        return await on_loop(self.loop, _call(self.trajectory.rows))

    async def stats(self) -> SequenceStats:
        return await on_loop(self.loop, _call(self.trajectory.stats))

    async def turns(self) -> list[TurnRecord]:
        return await on_loop(self.loop, _call(self.trajectory.records))

    def set_budget(self, budget: Budget | None) -> None:
        """Cap this episode's turns, sampled tokens or context (`budget.py`); set it before the harness's
        first request. Past a cap, requests get a final reply in their dialect and `budget_hit` says which."""
        self.budget = None if budget is None or budget.unlimited else budget

    def fail_all(self, error: OpenEnvError) -> None:
        """Answer every parked request with `error` (the session is closing). Loop thread only."""
        self.closed = True
        self.gate.close(error)

    # ---- request path (runs on the server loop) ----------------------------------------------------

    async def handle(
        self,
        req: CanonicalRequest,
        dialect: str,
        *,
        digest: str | None = None,
        retry: bool = False,
        offload: bool = False,
        on_tokens: TokenSink | None = None,
    ) -> Completion:
        """Answer one generation request: render, link, wait for a decision, generate, record.

        Args:
            req: the canonical request.
            dialect: the wire format's name (recorded on the turn).
            digest: a digest of the raw request body; answered requests are remembered by it.
            retry: the client marked this as a retry; a remembered reply is replayed, unrecorded. A body
                identical to one still being answered is shared, not made twice, marked or not: it is
                a client that timed out and sent it again (google-genai and codex number no retries).
            offload: render and tokenize on a worker thread (a big request), not on the event loop.
            on_tokens: hears of sampled tokens as the engine streams them (a backend with
                `generate_stream`); the returned completion is the same either way.

        Raises:
            BackendUnavailable: the backend failed; the turn is kept as a gap.
            BadRequest: the prompt does not fit the context window.
        """
        self.last_active = time.monotonic()
        replayed = self.replay.replayed(digest) if retry else None
        if replayed is not None:
            return replayed
        inflight = self.replay.join(digest)
        if inflight is not None:
            return await asyncio.shield(inflight)
        cap = self.limits.max_turns
        if cap is not None and len(self.trajectory.turns) >= cap:
            raise TurnCapReached(
                f"this session has stored its cap of {cap} turns; open a new session "
                "(the proxy's max_turns setting)"
            )
        busy = self.limits.max_inflight
        if busy is not None and self._answering >= busy:  # each one held holds its body, prompt and a thread
            raise SessionBusy(f"this session is already answering {busy} requests; retry when one is done")
        self._answering += 1
        try:
            if digest is None:
                return await self._handle(req, dialect, offload, on_tokens)
            done = await self.replay.once(digest, lambda: self._handle(req, dialect, offload, on_tokens))
        finally:
            self._answering -= 1
            self.last_active = time.monotonic()
        self.replay.remember(digest, done)
        return done

    def shared(self, digest: str | None) -> bool:
        """Whether a resent copy of the in-flight request `digest` is waiting on its answer (then the first
        client leaving must not cancel it)."""
        return self.replay.shared(digest)

    async def _handle(
        self, req: CanonicalRequest, dialect: str, offload: bool = False, on_tokens: TokenSink | None = None
    ) -> Completion:
        aux = bool(self._aux and self._aux(req))
        plan_for = self.planner.plan
        plan = (
            await asyncio.to_thread(plan_for, req, self.trajectory, aux=aux)
            if offload
            else plan_for(req, self.trajectory, aux=aux)
        )

        # Before anything is parked, scored or sampled: a prompt that cannot fit is refused at once (a
        # controller's `complete()` used to score it whole, whatever its length).
        def new_turn() -> Turn:
            return self.trajectory.add(
                Turn(
                    id=_turn_id(),
                    index=0,
                    dialect=dialect,
                    aux=aux,
                    n_messages=len(req.messages),
                    prompt_len=len(plan.prompt_ids),
                    created=int(time.time()),
                )
            )

        try:
            window = await self._context_window()
        except OpenEnvError as exc:  # the engine is unreachable: the request is a gap like a failed sample
            turn = new_turn()
            turn.gap = f"{type(exc).__name__}: {exc.message}"
            await self._journal_turn(turn, plan)
            raise
        if len(plan.prompt_ids) >= window:
            raise BadRequest(
                f"the prompt is {len(plan.prompt_ids)} tokens but the context window is {window}; "
                "shorten the conversation",
                param="messages",
            )
        turn = new_turn()
        over = (
            None
            if aux or self.budget is None
            else self.budget.exceeded(self._used_turns, self._used_tokens, len(plan.prompt_ids))
        )
        if over is not None:
            return self._budget_reply(turn, req, over)
        decision: Decision = Sample()
        pending: PendingTurn | None = None
        if self.gate.parks(aux):
            pending = PendingTurn(self.loop, turn, req, plan.prompt_ids)
            with waiting("policy"):
                decision = await self.gate.wait(pending)
        try:
            done = await _within(
                self._answer(turn, req, plan, decision, on_tokens), decision, self.limits.turn_timeout_s
            )
        except Exception as exc:  # the harness and the controller both hear of any failure
            error = (
                exc
                if isinstance(exc, OpenEnvError)
                else EnvError(f"turn failed: {type(exc).__name__}: {exc}")
            )
            turn.gap = f"{type(error).__name__}: {error.message}"
            if pending is not None:
                pending.reject(error)
            await self._journal_turn(turn, plan)
            if error is exc:
                raise
            raise error from exc
        except asyncio.CancelledError:  # the client disconnected: generation was aborted, nothing recorded
            turn.gap = "cancelled: the client went away before the reply"
            if pending is not None:
                abandon(pending)
            raise
        if not aux:
            self.trajectory.record(
                turn,
                link=plan.link,
                prompt_ids=plan.prompt_ids,
                env_ids=plan.env_ids,
                messages=req.messages,
                tools=req.tools,
                text=plan.text,
                rewritten=plan.rewritten,
            )
            self._used_turns += 1
            self._used_tokens += len(done.token_ids)
        await self._journal_turn(turn, plan)  # on disk before the harness sees the reply
        if pending is not None:
            pending.finish(done)
        return done

    def _budget_reply(self, turn: Turn, req: CanonicalRequest, reason: str) -> Completion:
        """The final reply past a cap: never sampled, never trained, never parked for a controller."""
        self.budget_hit = self.budget_hit or reason
        turn.budget = reason
        turn.completion = Completion(
            id=turn.id,
            model=req.model or self._served_model,
            created=int(time.time()),
            text=budget_reply_text(reason),
            finish_reason="stop",
            usage=Usage(prompt_tokens=turn.prompt_len, completion_tokens=0),
        )
        return turn.completion

    async def _journal_turn(self, turn: Turn, plan: Plan) -> None:
        if self.journal is not None:
            await self.journal.turn(
                turn, prompt_ids=plan.prompt_ids, env_ids=plan.env_ids, max_tokens=turn.max_tokens
            )

    def count_tokens(self, req: CanonicalRequest, dialect: str) -> int:
        """Prompt tokens a request would take. Counted (`count_tokens_calls`), never stored as a turn: a
        harness may call it before every turn, and a client may call it in a loop."""
        _, ids = self._renderer.full_prompt(req.messages, req.tools)
        self.count_tokens_calls += 1
        self.last_active = time.monotonic()
        return len(ids)

    async def _answer(
        self,
        turn: Turn,
        req: CanonicalRequest,
        plan: Plan,
        decision: Decision,
        on_tokens: TokenSink | None = None,
    ) -> Completion:
        match decision:
            case Fail(error):
                raise error
            case Sample():
                turn.source = "sample"
                sink = (
                    None
                    if on_tokens is None
                    else (lambda new: on_tokens(turn.id, turn.created, turn.prompt_len, new))
                )
                ids, logprobs, finish = await self._generate(req, plan.prompt_ids, turn, sink)
            case Complete(text, token_ids):
                turn.source = "complete"
                ids = list(token_ids) if token_ids is not None else self._policy_ids(text or "")
                window = await self._context_window()
                if len(plan.prompt_ids) + len(ids) > window:
                    raise BadRequest(
                        f"the prompt ({len(plan.prompt_ids)} tokens) and the supplied reply "
                        f"({len(ids)}) exceed the context window of {window}",
                        param="completion",
                    )
                params, _ = effective_params(
                    req.sampling, self.sampling, policy=self.sampling_policy, aux=turn.aux
                )
                self._mark(turn, params, getattr(self._backend, "score_logprob_mode", "unknown"))
                with waiting("engine"):
                    logprobs = (
                        await self._backend.score(plan.prompt_ids, ids, temperature=params.temperature)
                        if ids
                        else []
                    )
                finish = "stop"
            case _:
                assert_never(decision)
        turn.completion = self._completion(turn, req, ids, logprobs, finish, len(plan.prompt_ids))
        return turn.completion

    async def _generate(
        self,
        req: CanonicalRequest,
        prompt_ids: Sequence[int],
        turn: Turn | None = None,
        on_tokens: Callable[[list[int]], None] | None = None,
    ) -> tuple[list[int], list[float], str]:
        params, overridden = effective_params(
            req.sampling, self.sampling, policy=self.sampling_policy, aux=turn is not None and turn.aux
        )
        window = await self._context_window()
        room = window - len(prompt_ids)
        if room <= 0:
            raise BadRequest(
                f"the prompt is {len(prompt_ids)} tokens but the context window is "
                f"{window}; shorten the conversation",
                param="messages",
            )
        if self.budget is not None:
            room = min(room, self.budget.room(self._used_tokens, len(prompt_ids)) or room)
        # A request that names no max_tokens gets the proxy's default output budget, not the whole window.
        asked = params.max_tokens if params.max_tokens is not None else self.limits.max_new_tokens_default
        params = params.model_copy(update={"max_tokens": min(asked or room, room)})
        if turn is not None:
            if not turn.aux:  # a training session at T != 1 on a raw engine never samples a turn
                await self.check_trainable()
            turn.max_tokens = params.max_tokens
            turn.overridden = overridden
        stream = getattr(self._backend, "generate_stream", None) if on_tokens is not None else None
        with waiting("engine"):
            if stream is not None:
                gen = await stream(prompt_ids, params, on_tokens)
            else:
                gen = await self._backend.generate(prompt_ids, params)
        if turn is not None:
            self._mark(turn, params, await self._mode_or_unknown())
        return gen.token_ids, gen.logprobs, gen.finish_reason

    async def logprob_mode(self) -> LogprobMode:
        """The verdict on its sampled logprobs (`capture/logprob_mode.py`) of the engine this session is on
        now. Asked each time, not once per session: a session over several engines moves when its engine
        fails, and the engines of a pool may disagree (the backend probes each engine once, so asking again
        costs nothing).

        Raises:
            BackendUnavailable: the engine did not answer the probe.
        """
        return await engine_logprob_mode(self._backend)

    async def check_trainable(self) -> None:
        """Refuse this session if it trains (`policy="trainer"` with sampling of its own) at a temperature
        other than 1 on an engine whose logprobs are not `processed`. Probes the engine only then.

        Raises:
            UntrainableEngine: one line saying how to start vLLM.
            BackendUnavailable: the engine did not answer the probe.
        """
        if needs_processed(self.sampling, policy=self.sampling_policy):
            require_trainable_engine(
                await self.logprob_mode(),
                self.sampling,
                policy=self.sampling_policy,
                engine=f"the {self._backend.name} backend",
            )

    async def _mode_or_unknown(self) -> LogprobMode:
        """The verdict for a turn already sampled: a probe that fails now marks the turn `unknown` rather than
        losing it (the next turn asks again)."""
        try:
            return await self.logprob_mode()
        except OpenEnvError:
            return "unknown"

    @staticmethod
    def _mark(turn: Turn, params: SamplingParams, mode: LogprobMode) -> None:
        """Record what the turn's logprobs mean: its temperature, the engine's mode, and whether they are the
        trainer's `log_softmax(logits / T)` over the full vocabulary."""
        turn.temperature = 1.0 if params.temperature is None else params.temperature
        turn.logprob_mode = mode
        turn.trainable = exact_for_training(mode, params)

    async def _context_window(self) -> int:
        await self._backend.ready()  # a remote engine's window is learned without blocking the loop
        return self._backend.context_window

    def _policy_ids(self, text: str) -> list[int]:
        """A policy's text reply as ids, closed with the end-of-turn token like a sampled stop."""
        ids = self._renderer.encode(text)
        eos = self._renderer.tokenizer.eos_token_id
        return ids + [eos] if eos is not None and (not ids or ids[-1] != eos) else ids

    def _completion(
        self,
        turn: Turn,
        req: CanonicalRequest,
        ids: list[int],
        logprobs: list[float],
        finish: str,
        prompt_len: int,
    ) -> Completion:
        parsed = self._parser.parse(self._renderer.completion_text(ids))
        calls = tuple(
            ToolCallPart(id=f"call_{turn.id}_{i}", name=c.name, arguments=c.arguments)
            for i, c in enumerate(parsed.tool_calls)
        )
        attempts = token_spans(parsed.attempts, ids, self._renderer.decode) if parsed.attempts else ()
        return Completion(
            id=turn.id,
            model=req.model or self._served_model,
            created=turn.created or int(time.time()),
            text=parsed.content,
            reasoning=parsed.reasoning,
            tool_calls=calls,
            token_ids=tuple(ids),
            logprobs=tuple(logprobs),
            finish_reason="tool_calls" if calls else finish,  # type: ignore[arg-type]  # the engine's finish reasons are a subset of the Literal (length, stop)
            usage=Usage(prompt_tokens=prompt_len, completion_tokens=len(ids)),
            call_attempts=attempts,
        )


@dataclass(frozen=True, slots=True)
class TurnLimits:
    """What one turn and one session may cost. None lifts a limit.

    Attributes:
        max_new_tokens_default: the output budget of a request that names no `max_tokens` (else it could
            generate up to the whole context window); recorded on the turn as `max_tokens`.
        turn_timeout_s: wall-clock limit of one sampled turn (a gap and the dialect's retryable error past it).
        max_turns: turns one session may store (an error in the dialect past it).
        max_inflight: requests one session may have in progress at once (parked, sampling or scoring); past
            it a retryable 429. Harnesses send one at a time, a few with parallel sub-agents; the agent's own
            flood of big bodies on its session token must not pile up on the host (issue 30, finding 5).
    """

    max_new_tokens_default: int | None = 8192
    turn_timeout_s: float | None = 600.0
    max_turns: int | None = 10_000
    max_inflight: int | None = 16


class TurnCapReached(BadRequest):
    """Raised when a session already stores `TurnLimits.max_turns` turns. A 400, not a retryable 429/529: a
    harness that retried would loop forever."""

    code = "turn_cap"


class SessionBusy(OpenEnvError):
    """Raised when a session already has `TurnLimits.max_inflight` requests in progress (retryable)."""

    status_code = 429
    code = "session_busy"


async def _within(
    answer: Coroutine[Any, Any, Completion], decision: Decision, default: float | None = None
) -> Completion:
    """The answer, within the controller's turn timeout (else the session's). Past it the turn is a gap and
    the harness gets its retryable error now, not when a stalled backend's own (longer) timeout fires."""
    timeout = None if isinstance(decision, Fail) else (decision.timeout or default)
    if timeout is None:
        return await answer
    try:
        async with asyncio.timeout(timeout):  # a timer handle on this task, no extra task per turn
            return await answer
    except TimeoutError:
        raise BackendUnavailable(
            f"the backend gave no answer within the turn timeout of {timeout:g} s; retry the request"
        ) from None


def _turn_id() -> str:
    return secrets.token_hex(12)


async def _call(fn: Callable[[], T]) -> T:
    return fn()
