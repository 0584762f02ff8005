"""`CaptureServer`: the proxy embedded in-process, served by uvicorn on a background thread.

The harness environment opens one session per episode and hands the harness `session.base_url`;
the standalone `openenv proxy` command serves the same app in the foreground.
"""

from __future__ import annotations

import os
from collections.abc import Coroutine
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Self, TypeVar

import uvicorn

from openenv.capture.app import create_app
from openenv.capture.backends.base import Backend
from openenv.capture.canonical import SamplingParams
from openenv.capture.logprob_mode import LogprobMode, engine_logprob_mode
from openenv.capture.registry import CaptureSessionRegistry
from openenv.capture.renderer import Renderer
from openenv.capture.routes.model import MAX_BODY_BYTES
from openenv.capture.sampling_policy import SamplingPolicy
from openenv.capture.session import AuxPredicate, CaptureSession, Mode, TurnLimits
from openenv.capture.sync_session import SyncCaptureSession
from openenv.core.loop_thread import ServerThread

__all__ = ["CaptureServer"]

T = TypeVar("T")


class CaptureServer:
    """The capture proxy on `127.0.0.1:<port>` in a daemon thread.

    Args:
        backend: what samples and scores (`VLLMBackend`, `LocalBackend`, ...).
        model: the model folder whose tokenizer and chat template render prompts (or pass `renderer`).
        renderer: a ready renderer (shared with other servers, or with template kwargs).
        parser: the completion parser name (`hermes`, ...).
        served_model: the name `/v1/models` lists.
        sampling: proxy-wide sampling overrides.
        host: the interface to bind (loopback unless you mean it).
        port: the port; 0 picks a free one (read it back from `port` after `start()`).
        admin_key: the admin API (`/sessions...`) then needs `Authorization: Bearer <admin_key>`.
        admin_port: serve the admin API on this port instead (0 picks one; see `admin_url`), and only
            the model routes on `port`. The in-process methods below never go through HTTP either way.
        journal_dir: journal every session's turns there before replying (see `capture.journal`); default
            `$OPENENV_JOURNAL_DIR`, and off when that is unset.
        journal_fsync: fsync each turn's journal line before the reply.
        limits: default output budget, turn timeout and per-session turn cap.
        idle_timeout_s: close sessions idle this long (None: the caller closes them; an episode does).
        max_body_bytes: larger request bodies get a 413.
        release_idle_s: seconds with no open session before the shared caches are emptied and freed heap is
            handed back to the OS (None: never; see `CaptureSessionRegistry`).

    Example:
        with CaptureServer(backend=VLLMBackend(url), model=path) as server:
            session = server.open_session(mode="gated")
            ...  # point the harness at session.base_url
            pending = session.next_pending(timeout=60)
            pending.sample()
    """

    def __init__(
        self,
        *,
        backend: Backend,
        model: str | Path | None = None,
        renderer: Renderer | None = None,
        parser: str = "hermes",
        served_model: str = "tiny",
        sampling: SamplingParams | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        admin_key: str | None = None,
        admin_port: int | None = None,
        journal_dir: str | Path | None = None,
        journal_fsync: bool = True,
        limits: TurnLimits | None = None,
        idle_timeout_s: float | None = None,
        max_body_bytes: int = MAX_BODY_BYTES,
        release_idle_s: float | None = 5.0,
    ) -> None:
        if renderer is None:
            if model is None:
                raise ValueError("CaptureServer needs model= (a tokenizer folder) or renderer=")
            renderer = Renderer.from_pretrained(model)
        if journal_dir is None and os.environ.get("OPENENV_JOURNAL_DIR"):
            journal_dir = os.environ["OPENENV_JOURNAL_DIR"]
        self.registry = CaptureSessionRegistry(
            renderer=renderer,
            backend=backend,
            parser=parser,
            served_model=served_model,
            sampling=sampling,
            journal_dir=journal_dir,
            journal_fsync=journal_fsync,
            limits=limits,
            idle_timeout_s=idle_timeout_s,
            release_idle_s=release_idle_s,
        )
        self.max_body_bytes = max_body_bytes
        self.host = host
        self.port = port
        self.admin_key = admin_key
        self.admin_port = admin_port
        self._server: uvicorn.Server | None = None
        self._admin: uvicorn.Server | None = None
        self._thread: ServerThread | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def admin_url(self) -> str:
        """Where the admin API answers: `base_url` unless an `admin_port` was given."""
        return self.base_url if self.admin_port is None else f"http://{self.host}:{self.admin_port}"

    def start(self, timeout: float = 30.0) -> Self:
        """Serve in a background thread; returns once the socket(s) accept connections."""
        split = self.admin_port is not None
        app = create_app(
            self.registry,
            admin_key=self.admin_key,
            routes="model" if split else "all",
            max_body_bytes=self.max_body_bytes,
        )
        self._server = self._uvicorn(app, self.port)
        if split:
            admin_app = create_app(
                self.registry, admin_key=self.admin_key, routes="admin", max_body_bytes=self.max_body_bytes
            )
            self._admin = self._uvicorn(admin_app, self.admin_port or 0)
        servers = [s for s in (self._server, self._admin) if s is not None]
        self._thread = ServerThread(servers, name="capture-server")
        if not self._thread.start(timeout):
            self._thread.stop(5)
            self._server = self._admin = self._thread = None
            raise RuntimeError(f"capture server did not start on {self.host}:{self.port}")
        self.port = self._server.servers[0].sockets[0].getsockname()[1]
        if self._admin is not None:
            self.admin_port = self._admin.servers[0].sockets[0].getsockname()[1]
            admin_app.state.model_base_url = self.base_url
        return self

    def _uvicorn(self, app: Any, port: int) -> uvicorn.Server:
        config = uvicorn.Config(
            app,
            host=self.host,
            port=port,
            log_level="warning",
            access_log=False,
            lifespan="on",
            timeout_graceful_shutdown=2,
        )
        return uvicorn.Server(config)

    def stop(self) -> None:
        """Stop serving; parked requests are failed, connections closed."""
        if self._server is None or self._thread is None:
            return
        if self._thread.loop_thread.running:
            self._run(self._close_all(), 5)
        self._thread.stop(10)
        self._server = self._admin = self._thread = None

    # ---- sessions --------------------------------------------------------------------------------

    def open_session(
        self,
        *,
        mode: Mode = "gated",
        sampling: SamplingParams | None = None,
        aux: AuxPredicate | None = None,
        gate_aux: bool = False,
        token: str | None = None,
        timeout: float = 30.0,
        sampling_policy: SamplingPolicy = "trainer",
    ) -> SyncCaptureSession:
        """A new session, as its blocking twin for a controller in this thread (`.session` is the async
        one); hand the harness `session.base_url` (and `session.token` as its API key).

        Args:
            mode: `gated` parks requests for `next_pending()`; `auto` samples them at once.
            sampling: sampling overrides for this session (the proxy's win over the harness's).
            aux: tags auxiliary requests (title generators, probes); they are answered by sampling,
                never parked unless `gate_aux`, and kept out of the sequences.
            gate_aux: park aux requests too (with `aux=True`).
            token: a fixed token (default: a random one).
            sampling_policy: `trainer` (a training session: `sampling` only, full-vocabulary, on an engine
                whose logprobs are the sampling distribution's at its temperature) or `request` (evaluation).

        Raises:
            BadRequest: a training session's sampling sets `top_p`, `top_k`, `min_p`, ... (`training_sampling`).
            UntrainableEngine: a training session at a temperature other than 1 on a raw-logprob engine.
        """
        return SyncCaptureSession(
            self._run(self._open(mode, sampling, aux, gate_aux, token, sampling_policy), timeout)
        )

    def close_session(self, token: str, timeout: float = 10.0) -> None:
        """Close a session (its trajectory stays readable on the session you hold)."""
        self._run(self._close(token), timeout)

    async def _open(
        self,
        mode: Mode,
        sampling: SamplingParams | None,
        aux: AuxPredicate | None,
        gate_aux: bool,
        token: str | None,
        sampling_policy: SamplingPolicy,
    ) -> CaptureSession:
        session = self.registry.open(
            base_url=self.base_url,
            mode=mode,
            sampling=sampling,
            aux=aux,
            gate_aux=gate_aux,
            token=token,
            sampling_policy=sampling_policy,
        )
        try:
            await session.check_trainable()
        except BaseException:
            self.registry.close(session.token, reason="refused")
            raise
        return session

    def logprob_mode(self, timeout: float = 30.0) -> LogprobMode:
        """The backend's verdict on its sampled logprobs (`capture/logprob_mode.py`; probed once per engine)."""
        return self._run(engine_logprob_mode(self.registry.backend), timeout)

    async def _close(self, token: str) -> None:
        self.registry.close(token)

    async def _close_all(self) -> None:
        self.registry.close_all("shutdown")

    def _submit(self, coro: Coroutine[Any, Any, T]) -> Future[T]:
        if self._thread is None:
            coro.close()
            raise RuntimeError("CaptureServer is not started; call start() first")
        return self._thread.loop_thread.submit(coro)

    def _run(self, coro: Coroutine[Any, Any, T], timeout: float | None) -> T:
        return self._submit(coro).result(timeout)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
