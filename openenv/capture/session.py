"""A capture session: one harness run's turns, answered automatically or gated by a controller.

An **auto** session samples every request from the backend at once (the standalone proxy). A
**gated** session parks each request as a `PendingTurn` with its rendered prompt ids; a controller
(the harness environment, often in another thread) takes it with `next_pending()` and resolves it
with `sample()`, `complete(text=|token_ids=)` or `fail()`. `run()` switches a gated session to auto.

Every entry point has a thread-safe sync form and an async form; both work from any thread or
event loop, because the session's state only ever changes on the server's own loop.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar, assert_never

from openenv.capture.backends.base import Backend
from openenv.capture.budget import Budget, budget_reply_text
from openenv.capture.canonical import CanonicalRequest, Completion, SamplingParams, ToolCallPart, Usage
from openenv.capture.journal import Journal
from openenv.capture.parsers.base import CompletionParser
from openenv.capture.parsers.spans import token_spans
from openenv.capture.renderer import Renderer
from openenv.capture.trajectory import Link, SequenceRow, SequenceStats, Trajectory, Turn, TurnRecord
from openenv.errors import BackendUnavailable, BadRequest, EnvError, OpenEnvError

__all__ = ["AuxPredicate", "CaptureSession", "Mode", "PendingTurn", "TurnCapReached", "TurnLimits"]

T = TypeVar("T")
Mode = Literal["auto", "gated"]
_REPLAY_WINDOW = 16  # recent replies kept for retries
_TIMEOUT_GRACE_S = 5.0  # a sync caller waits this much past its turn timeout, so the turn's own gap wins
AuxPredicate = Callable[[CanonicalRequest], bool]
# Hears of a streamed turn's tokens as the engine samples them: (turn id, the reply's `created`, its prompt
# length, new ids).
TokenSink = Callable[[str, int, int, list[int]], None]


@dataclass(frozen=True, slots=True)
class _Sample:
    timeout: float | None = None  # the controller's turn timeout: past it, the turn is a gap


@dataclass(frozen=True, slots=True)
class _Complete:
    text: str | None = None
    token_ids: list[int] | None = None
    timeout: float | None = None


@dataclass(frozen=True, slots=True)
class _Fail:
    error: OpenEnvError


_Decision = _Sample | _Complete | _Fail


@dataclass(slots=True)
class _Plan:
    """A request rendered and linked, before anyone answers it."""

    prompt_ids: Sequence[int]  # often a read-only `TokenIds`
    link: Link | None = None
    env_ids: Sequence[int] = ()
    text: str = ""
    rewritten: bool = False


class PendingTurn:
    """A model request parked in a gated session until a controller answers it.

    Attributes:
        id: the turn id (also the base of the reply's id).
        request: the canonical request (messages, tools, sampling).
        dialect: the wire format it came in.
        prompt_ids: the exact prompt ids the completion will be conditioned on (read-only; `list()`
            them to own a copy).
        aux: whether the session's aux predicate tagged it (kept out of sequences).
    """

    def __init__(self, session: CaptureSession, turn: Turn, request: CanonicalRequest,
                 prompt_ids: Sequence[int]) -> None:
        self.id = turn.id
        self.request = request
        self.dialect = turn.dialect
        self.prompt_ids = prompt_ids
        self.aux = turn.aux
        self._session = session
        self._decision: asyncio.Future[_Decision] = session.loop.create_future()
        self._done: asyncio.Future[Completion] = session.loop.create_future()
        # Nobody awaits the reply of a turn failed at close (its controller is gone): mark the error seen,
        # or asyncio logs "Future exception was never retrieved" for every such turn.
        self._done.add_done_callback(_mark_retrieved)

    # async forms
    async def asample(self) -> Completion:
        """Let the backend sample the reply; returns the recorded completion."""
        return await self._session._bridge(self._resolve(_Sample()))

    async def acomplete(self, *, text: str | None = None, token_ids: list[int] | None = None) -> Completion:
        """Answer with the policy's reply, as text (tokenized, end-of-turn appended) or exact ids;
        the backend scores it for logprobs and it is parsed into tool calls like a sample.

        Raises:
            BadRequest: neither or both of `text` and `token_ids` were given.
        """
        if (text is None) == (token_ids is None):
            raise BadRequest("complete() takes exactly one of text= or token_ids=")
        return await self._session._bridge(self._resolve(_Complete(text, token_ids)))

    # sync forms (thread-safe)
    def sample(self, timeout: float | None = None) -> Completion:
        return self._session._call(self._resolve(_Sample(timeout)), _outer(timeout))

    def complete(self, *, text: str | None = None, token_ids: list[int] | None = None,
                 timeout: float | None = None) -> Completion:
        if (text is None) == (token_ids is None):
            raise BadRequest("complete() takes exactly one of text= or token_ids=")
        return self._session._call(self._resolve(_Complete(text, token_ids, timeout)), _outer(timeout))

    def fail(self, message: str | OpenEnvError = "the controller failed this turn") -> None:
        error = message if isinstance(message, OpenEnvError) else EnvError(message)
        self._session._call(self._resolve(_Fail(error), wait=False), None)

    @property
    def resolved(self) -> bool:
        return self._decision.done()

    async def _resolve(self, decision: _Decision, wait: bool = True) -> Any:
        if self._decision.cancelled():
            raise BackendUnavailable(f"turn {self.id}'s harness disconnected before it was answered")
        if self._decision.done():
            raise BadRequest(f"turn {self.id} was already answered")
        self._decision.set_result(decision)
        return await asyncio.shield(self._done) if wait else None


class CaptureSession:
    """One harness run's routing scope and trajectory. Create through `CaptureSessionRegistry.open`."""

    def __init__(self, *, token: str, base_url: str, loop: asyncio.AbstractEventLoop, renderer: Renderer,
                 backend: Backend, parser: CompletionParser, mode: Mode = "auto",
                 sampling: SamplingParams | None = None, aux: AuxPredicate | None = None,
                 gate_aux: bool = False, served_model: str = "", budget: Budget | None = None,
                 journal: Journal | None = None, limits: TurnLimits | None = None) -> None:
        self.token = token
        self.base_url = base_url
        self.loop = loop
        self.mode: Mode = mode
        self.sampling = sampling
        self.trajectory = Trajectory()
        self._renderer = renderer
        self._backend = backend
        self._parser = parser
        self._aux = aux
        self._gate_aux = gate_aux
        self._served_model = served_model
        self._pending: asyncio.Queue[PendingTurn] = asyncio.Queue()
        self._replies: dict[str, Completion] = {}  # body digest -> reply, for retried requests
        # body digest -> how its streamed reply was cut into text deltas, so a replay streams the same bytes
        self.streamed_pieces: dict[str, tuple[str, ...]] = {}
        self._inflight: dict[str, asyncio.Future[Completion]] = {}  # body digest -> reply being made
        self._parked: dict[str, PendingTurn] = {}  # unanswered, whether or not a controller took them
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
        self._joined: set[str] = set()  # digests of in-flight requests that a resent copy is waiting on

    # ---- controller API ------------------------------------------------------------------------

    async def anext_pending(self, timeout: float | None = None) -> PendingTurn | None:
        """The next parked request, or None after `timeout` seconds."""
        return await self._bridge(self._next(timeout))

    def next_pending(self, timeout: float | None = None) -> PendingTurn | None:
        return self._call(self._next(timeout), None)

    def run(self) -> None:
        self._call(self._run(), None)

    def set_budget(self, budget: Budget | None) -> None:
        """Cap this episode's turns, sampled tokens or context (`budget.py`); set it before the harness's
        first request. Past a cap, requests get a final reply in their dialect and `budget_hit` says which."""
        self.budget = None if budget is None or budget.unlimited else budget

    def sequences(self) -> list[SequenceRow]:
        return self._call(self._sync(self.trajectory.rows), None)

    def stats(self) -> SequenceStats:
        return self._call(self._sync(self.trajectory.stats), None)

    def turns(self) -> list[TurnRecord]:
        return self._call(self._sync(self.trajectory.records), None)

    # ---- request path (runs on the server loop) ----------------------------------------------------

    async def handle(self, req: CanonicalRequest, dialect: str, *, digest: str | None = None,
                     retry: bool = False, offload: bool = False, on_tokens: TokenSink | None = None) -> Completion:
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
        if retry and digest in self._replies:
            return self._replies[digest]
        if digest in self._inflight:
            self._joined.add(digest)
            return await asyncio.shield(self._inflight[digest])
        cap = self.limits.max_turns
        if cap is not None and len(self.trajectory.turns) >= cap:
            raise TurnCapReached(f"this session has stored its cap of {cap} turns; open a new session "
                                 "(the proxy's max_turns setting)")
        self._answering += 1
        try:
            if digest is None:
                return await self._handle(req, dialect, offload, on_tokens)
            done = await self._handle_once(req, dialect, digest, offload, on_tokens)
        finally:
            self._answering -= 1
            self.last_active = time.monotonic()
        self._replies[digest] = done
        while len(self._replies) > _REPLAY_WINDOW:
            oldest = next(iter(self._replies))
            del self._replies[oldest]
            self.streamed_pieces.pop(oldest, None)
        while len(self.streamed_pieces) > _REPLAY_WINDOW:  # written after the reply streamed: prune here too
            self.streamed_pieces.pop(next(iter(self.streamed_pieces)))
        return done

    async def _handle_once(self, req: CanonicalRequest, dialect: str, digest: str, offload: bool = False,
                           on_tokens: TokenSink | None = None) -> Completion:
        """`_handle`, published under `digest` while it runs, so a retry can wait for it."""
        inflight: asyncio.Future[Completion] = self.loop.create_future()
        inflight.add_done_callback(_mark_retrieved)
        self._inflight[digest] = inflight
        try:
            done = await self._handle(req, dialect, offload, on_tokens)
        except Exception as exc:
            inflight.set_exception(exc)
            raise
        except BaseException:
            inflight.set_exception(BackendUnavailable("the first attempt of this request was cancelled; retry"))
            raise
        finally:
            if self._inflight.get(digest) is inflight:
                del self._inflight[digest]
                self._joined.discard(digest)
        inflight.set_result(done)
        return done

    async def _handle(self, req: CanonicalRequest, dialect: str, offload: bool = False,
                      on_tokens: TokenSink | None = None) -> Completion:
        aux = bool(self._aux and self._aux(req))
        plan = await asyncio.to_thread(self._plan, req, aux) if offload else self._plan(req, aux)
        turn = self.trajectory.add(Turn(id=_turn_id(), index=0, dialect=dialect, aux=aux,
                                        n_messages=len(req.messages), prompt_len=len(plan.prompt_ids),
                                        created=int(time.time())))
        over = None if aux or self.budget is None else \
            self.budget.exceeded(self._used_turns, self._used_tokens, len(plan.prompt_ids))
        if over is not None:
            return self._budget_reply(turn, req, over)
        decision: _Decision = _Sample()
        pending: PendingTurn | None = None
        if self.mode == "gated" and (self._gate_aux or not aux):
            pending = PendingTurn(self, turn, req, plan.prompt_ids)
            self._parked[pending.id] = pending
            await self._pending.put(pending)
            try:
                decision = await pending._decision
            except asyncio.CancelledError:  # the harness went away while the turn was parked
                _abandon(pending)
                raise
            finally:
                self._parked.pop(pending.id, None)
        try:
            done = await _within(self._answer(turn, req, plan, decision, on_tokens), decision,
                                 self.limits.turn_timeout_s)
        except Exception as exc:  # the harness and the controller both hear of any failure
            error = exc if isinstance(exc, OpenEnvError) else EnvError(f"turn failed: {type(exc).__name__}: {exc}")
            turn.gap = f"{type(error).__name__}: {error.message}"
            if pending is not None and not pending._done.done():
                pending._done.set_exception(error)
            await self._journal_turn(turn, plan)
            if error is exc:
                raise
            raise error from exc
        except asyncio.CancelledError:  # the client disconnected: generation was aborted, nothing recorded
            turn.gap = "cancelled: the client went away before the reply"
            if pending is not None:
                _abandon(pending)
            raise
        if not aux:
            self.trajectory.record(turn, link=plan.link, prompt_ids=plan.prompt_ids, env_ids=plan.env_ids,
                                   messages=req.messages, tools=req.tools, text=plan.text,
                                   rewritten=plan.rewritten)
            self._used_turns += 1
            self._used_tokens += len(done.token_ids)
        await self._journal_turn(turn, plan)  # on disk before the harness sees the reply
        if pending is not None:
            pending._done.set_result(done)
        return done

    def _budget_reply(self, turn: Turn, req: CanonicalRequest, reason: str) -> Completion:
        """The final reply past a cap: never sampled, never trained, never parked for a controller."""
        self.budget_hit = self.budget_hit or reason
        turn.budget = reason
        turn.completion = Completion(
            id=turn.id, model=req.model or self._served_model, created=int(time.time()),
            text=budget_reply_text(reason), finish_reason="stop",
            usage=Usage(prompt_tokens=turn.prompt_len, completion_tokens=0),
        )
        return turn.completion

    async def _journal_turn(self, turn: Turn, plan: _Plan) -> None:
        if self.journal is not None:
            await self.journal.turn(turn, prompt_ids=plan.prompt_ids, env_ids=plan.env_ids,
                                    max_tokens=turn.max_tokens)

    def shared(self, digest: str | None) -> bool:
        """Whether a resent copy of the in-flight request `digest` is waiting on its answer (then the first
        client leaving must not cancel it)."""
        return digest in self._joined

    def count_tokens(self, req: CanonicalRequest, dialect: str) -> int:
        """Prompt tokens a request would take. Counted (`count_tokens_calls`), never stored as a turn: a
        harness may call it before every turn, and a client may call it in a loop."""
        _, ids = self._renderer.full_prompt(req.messages, req.tools)
        self.count_tokens_calls += 1
        self.last_active = time.monotonic()
        return len(ids)

    def _plan(self, req: CanonicalRequest, aux: bool) -> _Plan:
        r = self._renderer
        link = None if aux else self.trajectory.find_parent(req.messages, req.tools)
        if link is not None:
            text, env_ids = self._env_ids(req, link)
            if env_ids is not None:
                return _Plan(self.trajectory.prefix_ids(link, then=env_ids), link, env_ids, text)
        text, ids = r.full_prompt(req.messages, req.tools)
        return _Plan(ids, text="" if r.append_only else text,
                     rewritten=not aux and self.trajectory.has_model_turns)

    def _env_ids(self, req: CanonicalRequest, link: Link) -> tuple[str, Sequence[int] | None]:
        """(prompt text, ids between the linked completion and this turn's); None ids on a rewrite."""
        r = self._renderer
        assert link.turn.completion is not None
        bridge = r.bridge_text(link.turn.completion.token_ids)
        if r.append_only:
            return "", r.suffix_ids(bridge, req.messages[link.n_messages:])
        full = r.full_text(req.messages, req.tools)
        suffix = r.extend_text(full, link.sequence.text[: link.turn.text_len])
        return full, None if suffix is None else tuple(r.encode(bridge + suffix))

    async def _answer(self, turn: Turn, req: CanonicalRequest, plan: _Plan, decision: _Decision,
                      on_tokens: TokenSink | None = None) -> Completion:
        match decision:
            case _Fail(error):
                raise error
            case _Sample():
                turn.source = "sample"
                sink = None if on_tokens is None else (lambda new: on_tokens(turn.id, turn.created, turn.prompt_len, new))
                ids, logprobs, finish = await self._generate(req, plan.prompt_ids, turn, sink)
            case _Complete(text, token_ids):
                turn.source = "complete"
                ids = list(token_ids) if token_ids is not None else self._policy_ids(text or "")
                logprobs = await self._backend.score(plan.prompt_ids, ids) if ids else []
                finish = "stop"
            case _:
                assert_never(decision)
        turn.completion = self._completion(turn, req, ids, logprobs, finish, len(plan.prompt_ids))
        return turn.completion

    async def _generate(self, req: CanonicalRequest, prompt_ids: Sequence[int],
                        turn: Turn | None = None, on_tokens: Callable[[list[int]], None] | None = None,
                        ) -> tuple[list[int], list[float], str]:
        params = req.sampling.merged(self.sampling)
        window = await self._context_window()
        room = window - len(prompt_ids)
        if room <= 0:
            raise BadRequest(f"the prompt is {len(prompt_ids)} tokens but the context window is "
                             f"{window}; shorten the conversation", param="messages")
        if self.budget is not None:
            room = min(room, self.budget.room(self._used_tokens, len(prompt_ids)) or room)
        # A request that names no max_tokens gets the proxy's default output budget, not the whole window.
        asked = params.max_tokens if params.max_tokens is not None else self.limits.max_new_tokens_default
        params = params.model_copy(update={"max_tokens": min(asked or room, room)})
        if turn is not None:
            turn.max_tokens = params.max_tokens
        stream = getattr(self._backend, "generate_stream", None) if on_tokens is not None else None
        if stream is not None:
            gen = await stream(prompt_ids, params, on_tokens)
        else:
            gen = await self._backend.generate(prompt_ids, params)
        return gen.token_ids, gen.logprobs, gen.finish_reason

    async def _context_window(self) -> int:
        await self._backend.ready()  # a remote engine's window is learned without blocking the loop
        return self._backend.context_window

    def _policy_ids(self, text: str) -> list[int]:
        """A policy's text reply as ids, closed with the end-of-turn token like a sampled stop."""
        ids = self._renderer.encode(text)
        eos = self._renderer.tokenizer.eos_token_id
        return ids + [eos] if eos is not None and (not ids or ids[-1] != eos) else ids

    def _completion(self, turn: Turn, req: CanonicalRequest, ids: list[int], logprobs: list[float],
                    finish: str, prompt_len: int) -> Completion:
        parsed = self._parser.parse(self._renderer.completion_text(ids))
        calls = tuple(ToolCallPart(id=f"call_{turn.id}_{i}", name=c.name, arguments=c.arguments)
                      for i, c in enumerate(parsed.tool_calls))
        attempts = token_spans(parsed.attempts, ids, self._renderer.decode) if parsed.attempts else ()
        return Completion(
            id=turn.id, model=req.model or self._served_model, created=turn.created or int(time.time()),
            text=parsed.content,
            reasoning=parsed.reasoning, tool_calls=calls, token_ids=tuple(ids), logprobs=tuple(logprobs),
            finish_reason="tool_calls" if calls else finish,  # type: ignore[arg-type]
            usage=Usage(prompt_tokens=prompt_len, completion_tokens=len(ids)), call_attempts=attempts,
        )

    async def _next(self, timeout: float | None) -> PendingTurn | None:
        try:
            return await asyncio.wait_for(self._pending.get(), timeout)
        except TimeoutError:
            return None

    async def _run(self) -> None:
        self.mode = "auto"
        self._resolve_parked(_Sample())

    def _resolve_parked(self, decision: _Decision) -> None:
        while not self._pending.empty():
            self._pending.get_nowait()
        for pending in list(self._parked.values()):
            if not pending.resolved:
                pending._decision.set_result(decision)

    async def _sync(self, fn: Callable[[], T]) -> T:
        return fn()

    def fail_all(self, error: OpenEnvError) -> None:
        """Answer every parked request with `error` (the session is closing). Loop thread only."""
        self.closed = True
        self._resolve_parked(_Fail(error))

    # ---- loop bridging -------------------------------------------------------------------------------

    def _call(self, coro: Coroutine[Any, Any, T], timeout: float | None) -> T:
        """Run `coro` on the session's loop from any other thread and wait for it."""
        if _running_loop() is self.loop:
            coro.close()
            raise RuntimeError("sync session methods cannot run on the server's own loop; use the a-methods")
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    async def _bridge(self, coro: Coroutine[Any, Any, T]) -> T:
        """Await `coro` on the session's loop from whichever loop we are on."""
        if _running_loop() is self.loop:
            return await coro
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self.loop))


@dataclass(frozen=True, slots=True)
class TurnLimits:
    """What one turn and one session may cost. None lifts a limit.

    Attributes:
        max_new_tokens_default: the output budget of a request that names no `max_tokens` (else it could
            generate up to the whole context window); recorded on the turn as `max_tokens`.
        turn_timeout_s: wall-clock limit of one sampled turn (a gap and the dialect's retryable error past it).
        max_turns: turns one session may store (an error in the dialect past it).
    """

    max_new_tokens_default: int | None = 8192
    turn_timeout_s: float | None = 600.0
    max_turns: int | None = 10_000


class TurnCapReached(BadRequest):
    """Raised when a session already stores `TurnLimits.max_turns` turns. A 400, not a retryable 429/529: a
    harness that retried would loop forever."""

    code = "turn_cap"


def _abandon(pending: PendingTurn) -> None:
    """A parked turn whose harness left: its controller's sample()/complete() gets an error, not a hang."""
    if not pending._decision.done():
        pending._decision.cancel()
    if not pending._done.done():
        pending._done.set_exception(BackendUnavailable("the harness disconnected before this turn was answered"))


def _mark_retrieved(future: asyncio.Future[Completion]) -> None:
    if not future.cancelled():
        future.exception()


async def _within(answer: Coroutine[Any, Any, Completion], decision: _Decision,
                  default: float | None = None) -> Completion:
    """The answer, within the controller's turn timeout (else the session's). Past it the turn is a gap and
    the harness gets its retryable error now, not when a stalled backend's own (longer) timeout fires."""
    timeout = None if isinstance(decision, _Fail) else (decision.timeout or default)
    if timeout is None:
        return await answer
    try:
        async with asyncio.timeout(timeout):  # a timer handle on this task, no extra task per turn
            return await answer
    except TimeoutError:
        raise BackendUnavailable(f"the backend gave no answer within the turn timeout of {timeout:g} s; "
                                 "retry the request") from None


def _outer(timeout: float | None) -> float | None:
    return None if timeout is None else timeout + _TIMEOUT_GRACE_S


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _turn_id() -> str:
    return secrets.token_hex(12)

