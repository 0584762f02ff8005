"""`VLLMEngines`: the vLLM backend over several engines behind one run.

- **A session stays on one engine**, so the engine's prefix cache holds its growing prompt: turn N+1's
  prompt is turn N's prompt + completion + a few new tokens, and recomputing that prefix on another
  engine would cost the whole prompt again. The capture proxy asks for a per-session view (`bind`) when
  it opens a session and `release`s it at close.
- **A new session goes to the least-loaded engine**: fewest pinned sessions plus calls in flight
  (ties: the first listed).
- **An engine that fails is out of rotation** until it passes a health check (`GET /health`), retried at
  most every `recheck_s`: no new session is pinned to it, and a pinned session whose engine fails moves
  to a healthy one and retries the call there once (the harness sees nothing; the prefix cache is lost
  for that session only). With no healthy engine left the call raises `BackendUnavailable`, which the
  proxy turns into the dialect's retryable error.
- **Streaming** (`generate_stream`) goes through the same pinned engine. It moves to another engine only
  while no token has reached the caller: once the harness has seen text, a second engine would sample a
  different reply under it, so a failure after the first token is the turn's error (the engine still
  leaves the rotation).

Each engine is a `VLLMBackend`, with its own keep-alive client.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from openenv.capture.backends.base import Generation
from openenv.capture.backends.vllm import VLLMBackend
from openenv.capture.canonical import SamplingParams
from openenv.capture.logprob_mode import LogprobMode
from openenv.errors import BackendUnavailable, BadRequest

__all__ = ["EngineState", "VLLMEngines", "split_urls", "vllm_backend"]


def split_urls(urls: str | Sequence[str] | None) -> tuple[str, ...]:
    """Engine base URLs from one URL, a comma-separated list (a flag's, `$OPENENV_VLLM_URL`'s) or a
    sequence: stripped, no trailing `/`, empty entries dropped. The one parser of such lists."""
    listed = urls.split(",") if isinstance(urls, str) else (urls or ())
    return tuple(u.strip().rstrip("/") for u in listed if u.strip())


def vllm_backend(urls: str | Sequence[str], **options: Any) -> VLLMBackend | VLLMEngines:
    """One `VLLMBackend` for one URL; `VLLMEngines` for several (a list, or `"http://a,http://b"`)."""
    listed = split_urls(urls)
    if not listed:
        raise BadRequest("the vLLM backend needs at least one engine URL")
    return VLLMBackend(listed[0], **options) if len(listed) == 1 else VLLMEngines(list(listed), **options)


@dataclass
class EngineState:
    """One engine and its load, as the picker sees it."""

    backend: VLLMBackend
    sessions: int = 0
    in_flight: int = 0
    healthy: bool = True
    recheck_at: float = 0.0
    failures: int = 0
    calls: int = field(default=0)

    @property
    def url(self) -> str:
        return self.backend.base_url

    @property
    def load(self) -> int:
        return self.sessions + self.in_flight


class VLLMEngines:
    """Several vLLM servers serving the same model; see the module docstring.

    Args:
        base_urls: the engines' base URLs (no /v1).
        recheck_s: how often an engine out of rotation is health-checked again.
        **options: passed to each `VLLMBackend` (timeout, model, context_window, on_reply).
    """

    name = "vllm"
    score_logprob_mode = "raw"

    def __init__(self, base_urls: Sequence[str], *, recheck_s: float = 2.0, **options: Any) -> None:
        if not base_urls:
            raise BadRequest("VLLMEngines needs at least one engine URL")
        self.engines = [EngineState(VLLMBackend(url, **options)) for url in base_urls]
        self.recheck_s = recheck_s
        self._default = _Pinned(self, token="")  # calls that come without a session (tests, tools)

    @property
    def base_url(self) -> str:
        return self.engines[0].url

    @property
    def context_window(self) -> int:
        return self._learned().backend.context_window

    @property
    def model(self) -> str:
        return self._learned().backend.model

    def bind(self, token: str) -> _Pinned:
        """The backend a session uses: it picks its engine at its first call and keeps it."""
        return _Pinned(self, token)

    async def ready(self) -> None:
        await self._default.ready()

    async def generate(self, prompt_ids: Sequence[int], params: SamplingParams) -> Generation:
        return await self._default.generate(prompt_ids, params)

    async def generate_stream(
        self, prompt_ids: Sequence[int], params: SamplingParams, on_tokens: Callable[[list[int]], None]
    ) -> Generation:
        return await self._default.generate_stream(prompt_ids, params, on_tokens)

    async def logprob_mode(self) -> LogprobMode:
        """The verdict of the engine a call without a session would use (each engine probes itself once)."""
        return await self._default.logprob_mode()

    async def score(
        self, prompt_ids: Sequence[int], completion_ids: Sequence[int], *, temperature: float | None = None
    ) -> list[float]:
        return await self._default.score(prompt_ids, completion_ids, temperature=temperature)

    async def aclose(self) -> None:
        for engine in self.engines:
            await engine.backend.aclose()

    def close_idle(self) -> None:
        """Every engine's idle connections closed (`VLLMBackend.close_idle`)."""
        for engine in self.engines:
            engine.backend.close_idle()

    def loads(self) -> dict[str, dict[str, int | bool]]:
        """Per engine URL: pinned sessions, calls in flight, calls made, failures and health."""
        return {
            e.url: {
                "sessions": e.sessions,
                "in_flight": e.in_flight,
                "calls": e.calls,
                "failures": e.failures,
                "healthy": e.healthy,
            }
            for e in self.engines
        }

    # ---- picking ------------------------------------------------------------------------------------

    async def pick(self, avoid: EngineState | None = None) -> EngineState:
        """The least-loaded healthy engine (engines due a health check are checked first).

        Raises:
            BackendUnavailable: no engine is healthy.
        """
        now = time.monotonic()
        due = [e for e in self.engines if not e.healthy and e.recheck_at <= now and e is not avoid]
        if due:
            await asyncio.gather(*(self._recheck(e) for e in due))
        healthy = [e for e in self.engines if e.healthy and e is not avoid]
        if not healthy:
            urls = ", ".join(e.url for e in self.engines)
            raise BackendUnavailable(f"no vLLM engine is healthy ({urls}); retry once one is back")
        return min(healthy, key=lambda e: e.load)  # min keeps the first of equals: listed order breaks ties

    def mark_down(self, engine: EngineState) -> None:
        engine.healthy = False
        engine.failures += 1
        engine.recheck_at = time.monotonic() + self.recheck_s

    async def _recheck(self, engine: EngineState) -> None:
        from openenv.capture.backends.engine_http import engine_client

        http = engine_client(engine.url, timeout=2.0, keepalive_s=0.0)
        try:
            status, _ = await http.request("GET", "/health", timeout=2.0)
            ok = status == 200
        except (OSError, TimeoutError):
            ok = False
        finally:
            http.close()
        if ok:
            engine.healthy = True
        else:
            engine.recheck_at = time.monotonic() + self.recheck_s

    def _learned(self) -> EngineState:
        return next((e for e in self.engines if e.healthy), self.engines[0])


class _Pinned:
    """A session's view of `VLLMEngines`: one engine, picked at the first call, moved only if it fails."""

    name = "vllm"
    score_logprob_mode = "raw"

    def __init__(self, pool: VLLMEngines, token: str) -> None:
        self._pool = pool
        self.token = token
        self.engine: EngineState | None = None
        self._lock = asyncio.Lock()

    @property
    def context_window(self) -> int:
        return (self.engine or self._pool._learned()).backend.context_window

    @property
    def model(self) -> str:
        return (self.engine or self._pool._learned()).backend.model

    async def ready(self) -> None:
        await self._call(lambda backend: backend.ready(), count=False)

    async def generate(self, prompt_ids: Sequence[int], params: SamplingParams) -> Generation:
        return await self._call(lambda backend: backend.generate(prompt_ids, params))

    async def generate_stream(
        self, prompt_ids: Sequence[int], params: SamplingParams, on_tokens: Callable[[list[int]], None]
    ) -> Generation:
        """`VLLMBackend.generate_stream` on this session's engine; moved to another engine on failure only
        while no token has been handed to `on_tokens` (see the module doc)."""
        sent = [False]

        def relay(new: list[int]) -> None:
            sent[0] = True
            on_tokens(new)

        return await self._call(
            lambda backend: backend.generate_stream(prompt_ids, params, relay), may_move=lambda: not sent[0]
        )

    async def logprob_mode(self) -> LogprobMode:
        """This session's engine's verdict (probed once per engine, `VLLMBackend.logprob_mode`)."""
        return await self._call(lambda backend: backend.logprob_mode(), count=False)  # type: ignore[no-any-return]  # _call is generic over the backend method and returns Any

    async def score(
        self, prompt_ids: Sequence[int], completion_ids: Sequence[int], *, temperature: float | None = None
    ) -> list[float]:
        return await self._call(
            lambda backend: backend.score(prompt_ids, completion_ids, temperature=temperature)
        )

    def release(self) -> None:
        """The session closed: its engine has one session fewer."""
        if self.engine is not None:
            self.engine.sessions -= 1
            self.engine = None

    async def aclose(self) -> None:
        self.release()

    async def _engine(self, avoid: EngineState | None = None) -> EngineState:
        async with self._lock:
            if self.engine is None or not self.engine.healthy or self.engine is avoid:
                chosen = await self._pool.pick(avoid)
                self.release()
                chosen.sessions += 1
                self.engine = chosen
            return self.engine

    async def _call(
        self, call: Any, *, count: bool = True, may_move: Callable[[], bool] = lambda: True
    ) -> Any:
        """`call(backend)` on this session's engine; if that engine fails, once more on another one
        (when `may_move()` still allows it)."""
        engine = await self._engine()
        try:
            return await self._on(engine, call, count)
        except BackendUnavailable:
            self._pool.mark_down(engine)
            if not may_move():
                raise
            moved = await self._engine(avoid=engine)  # raises when no other engine is healthy
        try:
            return await self._on(moved, call, count)
        except BackendUnavailable:
            self._pool.mark_down(moved)
            raise

    @staticmethod
    async def _on(engine: EngineState, call: Any, count: bool) -> Any:
        engine.in_flight += count
        engine.calls += count
        try:
            return await call(engine.backend)
        finally:
            engine.in_flight -= count
