"""`LocalServer`: an ASGI app served by uvicorn in a background thread, on a free 127.0.0.1 port.

Tests, benchmarks, `AutoEnv` (for installed envs and `envs/` folders) and the Gymnasium adapter use it
to get a real socket without a subprocess.
"""

from __future__ import annotations

import socket
import threading
import time
from types import TracebackType
from typing import Any, Self

import uvicorn

from openenv.core.auth import forget_token, remember_token
from openenv.errors import TransportError

__all__ = ["LocalServer"]


class LocalServer:
    """Serve `app` on `host:port` (a free loopback port by default) until `stop()`."""

    def __init__(
        self, app: Any, *, host: str = "127.0.0.1", port: int = 0, log_level: str = "warning"
    ) -> None:
        self.host = host
        self.port = port or self.free_port(host)
        security = getattr(getattr(app, "state", None), "security", None)
        self.token: str | None = security.token if security is not None else None
        max_frame = security.max_frame_bytes if security is not None else 16 * 2**20
        config = uvicorn.Config(
            app, host=host, port=self.port, log_level=log_level, lifespan="on", ws="websockets-sansio",
            ws_max_size=max_frame,  # uvicorn closes with 1009 above it; the app checks again (other servers)
        )
        self._server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

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
        self._thread = threading.Thread(
            target=self._server.run, name=f"openenv-uvicorn-{self.port}", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise TransportError(f"the server on {self.base_url} did not start within {timeout_s:g} s")
            time.sleep(0.01)
        return self

    def stop(self, timeout_s: float = 10.0) -> None:
        """Ask uvicorn to shut down (running the app's lifespan exit) and wait for the thread."""
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout_s)
            self._thread = None
        if self.token:
            forget_token(self.base_url)

    @staticmethod
    def free_port(host: str = "127.0.0.1") -> int:
        """A TCP port on `host` that nothing listens on right now."""
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((host, 0))
            return int(s.getsockname()[1])

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
