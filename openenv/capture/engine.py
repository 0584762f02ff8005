"""An engine is one value: `EngineSpec`, and one way to a capture server for it.

An episode's model turns are sampled by a backend (`local`: transformers in this process; `vllm`: one or
more vLLM servers) and rendered with a model folder's tokenizer and chat template. Every road into an
episode (`openenv run`/`eval`/`train`/`soak`, the Ray workers, `HarnessEnvironment` served with no
arguments) says which with an `EngineSpec`, built from words, paths and URL lists by `EngineSpec.of`:
the one parser of a URL list (`backends.vllm_engines.split_urls`) and the one reader of `OPENENV_BACKEND`, `OPENENV_MODEL` and
`OPENENV_VLLM_URL`. A capture server for a spec comes from a `CapturePool`, the one owner of server
lifetimes: whoever starts a road opens one and closes it when the road ends (`shared_capture_server` is the
process's own pool, for a served env).

Every capture server started here has its admin API (`/sessions...`: list, open, read and close
sessions) locked with a random key: harnesses reach the server's port, the episodes drive their
sessions in-process, and nobody needs that API over HTTP. Unlocked (a training run's policy server
was), an agent could open sessions until the server is full, starving the run's other episodes, or
read and close its own session by its token.
"""

from __future__ import annotations

import os
import secrets
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from openenv.capture.backends.named import BACKEND_NAMES, BackendName, make_backend
from openenv.errors import BadRequest

if TYPE_CHECKING:
    from openenv.capture.backends.base import Backend
    from openenv.capture.server import CaptureServer

__all__ = ["CapturePool", "EngineSpec", "shared_capture_server", "start_capture_server"]


@dataclass(frozen=True)
class EngineSpec:
    """Which engine samples an episode's turns, and which tokenizer renders its prompts.

    Picklable and hashable: a Ray worker builds (and caches) one capture server per spec it is sent.

    Args:
        backend: `vllm` (servers every node reaches) or `local` (in-process; threads only).
        model: the tokenizer/chat-template folder (for `local`, also the weights); None: the tiny model.
        vllm_urls: one or more vLLM base URLs (no /v1); sessions spread over them (`VLLMEngines`).
    """

    backend: BackendName = "vllm"
    model: str | None = None
    vllm_urls: tuple[str, ...] = ()

    @classmethod
    def of(
        cls,
        backend: str | None = None,
        *,
        model: str | Path | None = None,
        vllm_url: str | Sequence[str] | None = None,
    ) -> EngineSpec:
        """The spec for a caller's words: what is not given comes from `$OPENENV_BACKEND` (default
        `local`), `$OPENENV_MODEL` and, for `vllm`, `$OPENENV_VLLM_URL`. A missing URL is not an error
        here (a served env is built before it is configured); `check` and starting a server refuse it.

        Raises:
            BadRequest: an unknown backend name.
        """
        name = backend or os.environ.get("OPENENV_BACKEND") or "local"
        if name not in BACKEND_NAMES:
            source = "backend" if backend else "OPENENV_BACKEND"
            raise BadRequest(f"{source}={name!r}: expected one of {', '.join(BACKEND_NAMES)}")
        folder = model or os.environ.get("OPENENV_MODEL") or None
        urls: tuple[str, ...] = ()
        if name == "vllm":
            from openenv.capture.backends.vllm_engines import split_urls  # the vLLM client: only for vllm

            urls = split_urls(vllm_url or os.environ.get("OPENENV_VLLM_URL"))
        return cls(backend=name, model=str(folder) if folder else None, vllm_urls=urls)

    def check(self) -> None:
        """Raises `BadRequest` when the spec cannot start: `vllm` without a URL."""
        if self.backend == "vllm" and not self.vllm_urls:
            raise BadRequest("backend='vllm' needs vllm_url= or OPENENV_VLLM_URL")

    def check_remote(self) -> None:
        """Refuse what cannot cross processes, before any actor starts.

        Raises:
            BadRequest: the `local` backend (the model lives inside one process), or `vllm` without a URL.
        """
        if self.backend == "local":
            raise BadRequest(
                "the 'local' backend runs the model inside one process, so Ray workers on other "
                "machines cannot use it; serve the model with vLLM and pass backend='vllm' with a "
                "URL every node reaches (CLI: --backend vllm --vllm-url URL)"
            )
        if not self.vllm_urls:
            raise BadRequest(
                "backend='vllm' on Ray needs the engine URL(s) (vllm_url=, or $OPENENV_VLLM_URL)"
            )

    def folder(self) -> Path:
        """The model folder: the one named, else the tiny model (built on first use)."""
        if self.model:
            return Path(self.model)
        from openenv.models.tiny import tiny_model_path  # torch-free, but builds the model when missing

        return tiny_model_path()

    def make_backend(self, **options: Any) -> Backend:
        """A new backend for this spec (`options` go to its constructor).

        Raises:
            BadRequest: `vllm` without a URL.
        """
        self.check()
        return make_backend(self.backend, model=self.folder(), vllm_url=self.vllm_urls, **options)


def start_capture_server(
    spec: EngineSpec, *, backend: Backend | None = None, **options: Any
) -> CaptureServer:
    """A new capture server on 127.0.0.1 for `spec`, its admin API locked with a random key.

    Args:
        spec: the engine; its folder renders the prompts.
        backend: an already built backend to sample with instead of the spec's (a trainer's live model).
        options: more `CaptureServer` arguments (`sampling`, `limits`, ...).

    Raises:
        BadRequest: `vllm` without a URL.
    """
    from openenv.capture.server import CaptureServer

    chosen = backend if backend is not None else spec.make_backend()
    options.setdefault("admin_key", secrets.token_urlsafe(32))
    return CaptureServer(backend=chosen, model=spec.folder(), **options).start()


class CapturePool:
    """The one owner of capture servers' lifetimes: a road (an eval run, a training run, a Ray worker, a
    Harbor server) opens a pool when it starts, takes its servers from it by spec (the same spec, the same
    server: one model load, many sessions) and closes it when it ends, which stops every server it
    started. Use it as a context manager.

    `CapturePool.started` counts the servers every pool has started in this process (a road's tests read
    it to see its server came from a pool).
    """

    started: ClassVar[int] = 0

    def __init__(self) -> None:
        self._servers: dict[EngineSpec, CaptureServer] = {}
        self._lock = threading.Lock()
        self._closed = False

    def acquire(
        self, spec: EngineSpec, *, backend: Callable[[], Backend] | None = None, **options: Any
    ) -> CaptureServer:
        """The pool's server for `spec`, started on first use (`start_capture_server`).

        Args:
            spec: the engine (the same backend, folder and URLs: the same server).
            backend: builds the backend to sample with instead of the spec's (a trainer's live model);
                called only when the server is started.
            options: more `CaptureServer` arguments, used only when the server is started.

        Raises:
            BadRequest: `vllm` without a URL. RuntimeError: the pool is closed.
        """
        spec.check()
        key = EngineSpec(spec.backend, str(spec.folder()), spec.vllm_urls)
        with self._lock:
            if self._closed:
                raise RuntimeError("this capture pool is closed: its road has ended")
            if key not in self._servers:
                built = backend() if backend is not None else None
                self._servers[key] = start_capture_server(key, backend=built, **options)
                CapturePool.started += 1
            return self._servers[key]

    def servers(self) -> list[CaptureServer]:
        """The servers started so far."""
        with self._lock:
            return list(self._servers.values())

    def close(self) -> None:
        """Stop every server this pool started; later `acquire`s are refused."""
        with self._lock:
            self._closed = True
            servers, self._servers = list(self._servers.values()), {}
        for server in servers:
            server.stop()

    def __enter__(self) -> CapturePool:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


# The process's own pool: a served env (built with no server) takes its server here; the process is its road.
_PROCESS_POOL = CapturePool()


def shared_capture_server(spec: EngineSpec) -> CaptureServer:
    """This process's capture server for `spec` (the same model folder and URLs: the same server),
    started on first use and kept for the process's life (the process's own `CapturePool`).

    Raises:
        BadRequest: `vllm` without a URL.
    """
    return _PROCESS_POOL.acquire(spec)
