"""`LocalServer`: an ASGI app served by uvicorn in a background thread, on a free 127.0.0.1 port.

Tests, benchmarks, `AutoEnv` (for installed envs and `envs/` folders) and the Gymnasium adapter use it
to get a real socket without a subprocess.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any, Self

import uvicorn

from openenv.core.auth import forget_token, remember_token
from openenv.core.loop_thread import ServerThread
from openenv.core.net import free_port
from openenv.errors import TransportError

__all__ = ["LocalServer"]


class LocalServer:
    """Serve `app` on `host:port` (a free loopback port by default) until `stop()`."""

    def __init__(
        self, app: Any, *, host: str = "127.0.0.1", port: int = 0, log_level: str = "warning"
    ) -> None:
        self.host = host
        self.port = port or free_port(host)
        security = getattr(getattr(app, "state", None), "security", None)
        self.token: str | None = security.token if security is not None else None
        max_frame = security.max_frame_bytes if security is not None else 16 * 2**20
        config = uvicorn.Config(
            app,
            host=host,
            port=self.port,
            log_level=log_level,
            lifespan="on",
            ws="websockets-sansio",
            ws_max_size=max_frame,  # uvicorn closes with 1009 above it; the app checks again (other servers)
        )
        self._server = uvicorn.Server(config)
        self._thread: ServerThread | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def headers(self) -> dict[str, str]:
        """The `Authorization` header this server wants (empty when it has no token)."""
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def start(self, timeout_s: float = 10.0) -> Self:
        """Start serving and return once the socket accepts connections. An env server's token is
        recorded for this process, so `EnvClient`s made here find it (`openenv.core.auth.token_for`)."""
        if self.token:
            remember_token(self.base_url, self.token)
        self._thread = ServerThread([self._server], name=f"openenv-uvicorn-{self.port}")
        if not self._thread.start(timeout_s):
            self._thread.stop(timeout_s)
            self._thread = None
            raise TransportError(f"the server on {self.base_url} did not start within {timeout_s:g} s")
        return self

    def stop(self, timeout_s: float = 10.0) -> None:
        """Ask uvicorn to shut down (running the app's lifespan exit) and wait for the thread."""
        if self._thread is not None:
            self._thread.stop(timeout_s)
            self._thread = None
        if self.token:
            forget_token(self.base_url)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
