"""The session table: what every session shares (renderer, backend, parser), the token lookup, journals
and the idle reaper."""

from __future__ import annotations

import asyncio
import secrets
import time
from pathlib import Path

from openenv.capture.backends.base import Backend
from openenv.capture.canonical import SamplingParams
from openenv.capture.dialects.state import DEFAULT_MAX_BYTES, DialectState
from openenv.capture.journal import Journal
from openenv.capture.parsers import detect_parser, get_parser
from openenv.capture.renderer import Renderer
from openenv.capture.sampling_policy import SamplingPolicy, training_sampling
from openenv.capture.session import AuxPredicate, CaptureSession, Mode, TurnLimits
from openenv.core.heap import trim
from openenv.core.reaper import reap_periodically
from openenv.errors import CapacityError, UnknownSession

__all__ = ["CaptureSessionRegistry"]


class CaptureSessionRegistry:
    """Opens, finds and closes sessions. Call its methods on the server's event loop.

    Args:
        renderer: the model's chat template and tokenizer.
        backend: what samples and scores.
        parser: the registered completion parser name (`hermes`, ...), or `auto` to pick it from the
            chat template (`detect_parser`; hermes when nothing matches).
        served_model: the model name listed by `/v1/models`.
        sampling: proxy-wide sampling settings that override every harness's.
        max_sessions: how many sessions may be open at once.
        journal_dir: write each session's turns to `<journal_dir>/<id>.jsonl` before replying (None: off).
        journal_fsync: fsync each turn's line before the reply (durable across a power loss, not only a
            killed proxy); costs a disk wait per turn, measured in docs/benchmarks.md.
        limits: per-turn and per-session limits (default output budget, turn timeout, turn cap).
        idle_timeout_s: close a session that has had no request for this long (None: never). A session
            with a request still being answered is never idle.
        dialect_bytes: what the dialects may remember between requests (validated history items,
            converted histories), shared by every session, in bytes (`DialectState`).
        release_idle_s: once the last open session has closed and none opened for this long, forget what
            the sessions' messages left in the shared caches and hand freed heap back to the OS (`release`;
            None: never). Without it a proxy that served 1,000 sessions kept 2.36x its starting RSS after
            all closed. The wait keeps back-to-back episodes (one closes, the next opens a second later)
            from paying for it.
    """

    def __init__(
        self,
        *,
        renderer: Renderer,
        backend: Backend,
        parser: str = "hermes",
        served_model: str = "tiny",
        sampling: SamplingParams | None = None,
        max_sessions: int = 4096,
        journal_dir: str | Path | None = None,
        journal_fsync: bool = True,
        limits: TurnLimits | None = None,
        idle_timeout_s: float | None = None,
        dialect_bytes: int = DEFAULT_MAX_BYTES,
        release_idle_s: float | None = 5.0,
    ) -> None:
        self.renderer = renderer
        self.backend = backend
        self.dialect_state = DialectState(dialect_bytes)
        if parser == "auto":  # the chat template shows how the model was taught to write tool calls
            parser = detect_parser(renderer.tokenizer.get_chat_template(None, [{}])) or "hermes"
        self.parser = get_parser(parser)
        self.served_model = served_model
        self.sampling = sampling
        self.max_sessions = max_sessions
        self.journal_dir = Path(journal_dir) if journal_dir is not None else None
        self.journal_fsync = journal_fsync
        self.limits = limits or TurnLimits()
        self.idle_timeout_s = idle_timeout_s
        self.sessions: dict[str, CaptureSession] = {}
        self._bound: dict[str, Backend] = {}
        self.reaped = 0
        self.release_idle_s = release_idle_s
        self.releases = 0  # how many times `release` ran (what tests and benches read)
        self._release_at: asyncio.TimerHandle | None = None

    def open(
        self,
        *,
        base_url: str,
        mode: Mode = "auto",
        sampling: SamplingParams | None = None,
        aux: AuxPredicate | None = None,
        gate_aux: bool = False,
        token: str | None = None,
        sampling_policy: SamplingPolicy = "trainer",
    ) -> CaptureSession:
        """A new session whose harness-facing base URL is `{base_url}/s/{token}`.

        `sampling_policy="trainer"` (a training session) samples with `sampling` only, which must then be a
        training policy's (`training_sampling`); `request` (evaluation, serving) lets the request's fields
        through. Await `session.check_trainable()` before handing it to a harness (the engine's verdict).

        Raises:
            CapacityError: `max_sessions` are already open (idle ones are reaped first).
            BadRequest: a training session's sampling truncates the distribution (`top_p`, `top_k`, ...).
        """
        if len(self.sessions) >= self.max_sessions:
            self.reap()
        if len(self.sessions) >= self.max_sessions:
            raise CapacityError(len(self.sessions), self.max_sessions)
        token = token or secrets.token_urlsafe(18)
        merged = self.sampling.merged(sampling) if self.sampling is not None else sampling
        if sampling_policy == "trainer":
            training_sampling(merged)
        # A backend over several engines (VLLMEngines) gives each session its own view, pinned to one engine.
        bind = getattr(self.backend, "bind", None)
        backend = bind(token) if bind is not None else self.backend
        self._bound[token] = backend
        journal = None
        if self.journal_dir is not None:
            journal = Journal(
                self.journal_dir,
                fsync=self.journal_fsync,
                meta={"mode": mode, "served_model": self.served_model},
            )
        session = CaptureSession(
            token=token,
            base_url=f"{base_url.rstrip('/')}/s/{token}",
            loop=asyncio.get_running_loop(),
            renderer=self.renderer,
            backend=backend,
            parser=self.parser,
            mode=mode,
            sampling=merged,
            aux=aux,
            gate_aux=gate_aux,
            served_model=self.served_model,
            journal=journal,
            limits=self.limits,
            sampling_policy=sampling_policy,
        )
        self.sessions[token] = session
        if self._release_at is not None:
            self._release_at.cancel()
            self._release_at = None
        return session

    def get(self, token: str | None) -> CaptureSession:
        """The live session for `token`.

        Raises:
            UnknownSession: no live session has this token (401 in the harness's dialect).
        """
        session = self.sessions.get(token or "")
        if session is None:
            shown = f"{token[:6]}..." if token else "none given"
            raise UnknownSession(
                f"unknown session token ({shown}); open a session with POST /sessions "
                "and point the harness at its base_url"
            )
        return session

    def close(self, token: str, reason: str = "closed") -> CaptureSession:
        """Close a session: parked requests get an error, later requests get 401."""
        session = self.get(token)
        del self.sessions[token]
        release = getattr(self._bound.pop(token, None), "release", None)
        if release is not None:
            release()
        session.fail_all(UnknownSession("the session was closed while this request was waiting"))
        if session.journal is not None:
            session.journal.close(reason)
        if not self.sessions and self.release_idle_s is not None and self._release_at is None:
            self._release_at = session.loop.call_later(self.release_idle_s, self._release_if_idle)
        return session

    def _release_if_idle(self) -> None:
        self._release_at = None
        if not self.sessions:
            self.release()

    def release(self) -> None:
        """Forget the shared caches' contents (dialect memos, rendered suffixes, learnt words), close the
        backend's idle engine connections (`close_idle`, where it has one) and return whole free heap
        pages to the OS (`core.heap.trim`). Safe at any time (the caches refill, connections reopen on
        use); the registry calls it on its loop when it has been empty for `release_idle_s`."""
        self.dialect_state.clear()
        self.renderer.forget_suffixes()
        close_idle = getattr(self.backend, "close_idle", None)
        if close_idle is None:
            self._trim()
            return
        close_idle()
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._trim()
            return
        # The transports let go of the closed connections over the next loop iterations: trim after that.
        loop.call_later(0.05, self._trim)

    def _trim(self) -> None:
        trim()
        self.releases += 1

    def idle_seconds(self, session: CaptureSession, now: float | None = None) -> float:
        """How long the session has waited for a request (0 while one is being answered)."""
        if session.busy:
            return 0.0
        return (time.monotonic() if now is None else now) - session.last_active

    def reap(self) -> int:
        """Close every session idle past `idle_timeout_s`; how many were closed."""
        if self.idle_timeout_s is None:
            return 0
        now = time.monotonic()
        idle = [t for t, s in self.sessions.items() if self.idle_seconds(s, now) >= self.idle_timeout_s]
        for token in idle:
            self.close(token, reason="idle")
        self.reaped += len(idle)
        return len(idle)

    async def reap_forever(self) -> None:
        """The idle reaper: runs for the app's lifetime (a no-op without `idle_timeout_s`)."""
        await reap_periodically(self.idle_timeout_s, self.reap)

    def close_all(self, reason: str = "shutdown") -> None:
        for token in list(self.sessions):
            self.close(token, reason=reason)
        if self._release_at is not None:  # shutting down: nothing to give back to
            self._release_at.cancel()
            self._release_at = None
