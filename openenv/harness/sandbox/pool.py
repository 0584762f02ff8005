"""WarmPool: Docker sandboxes started ahead of time, so an episode does not wait for the engine.

Creating and starting a container costs about a second of engine time (measured in
bench/bench_sandbox.py), which is most of what Docker adds to a reset. A pool keeps `size` sandboxes
started with the same options (image, limits, forwarded proxy port) and refills in the background as
episodes take them. Each sandbox is still used for exactly one episode and closed by its taker.
"""

from __future__ import annotations

import queue
import threading
from typing import Any, Self

from openenv.errors import OpenEnvError
from openenv.harness.sandbox.docker import DockerSandbox

__all__ = ["WarmPool"]


class WarmPool:
    """Keeps `size` started `DockerSandbox`es ready; `take()` hands one out and starts a replacement.

    Args:
        size: how many started sandboxes to keep waiting.
        **options: passed to every `DockerSandbox` (e.g. `forward_ports`, `mounts`, `image`).
    """

    def __init__(self, size: int = 2, **options: Any) -> None:
        self._size = size
        self._options = options
        self._ready: queue.Queue[DockerSandbox] = queue.Queue()
        self._lock = threading.Lock()
        self._filling = 0
        self._closed = False
        self.errors: list[str] = []
        self._fill()

    def _fill(self) -> None:
        with self._lock:
            missing = 0 if self._closed else self._size - self._ready.qsize() - self._filling
            self._filling += max(0, missing)
        for _ in range(missing):
            threading.Thread(target=self._make_one, name="warm-pool", daemon=True).start()

    def _make_one(self) -> None:
        box = None
        try:
            box = DockerSandbox(**self._options)
        except OpenEnvError as exc:  # `take()` then starts one in the foreground, which raises it
            self.errors.append(exc.message)
        with self._lock:  # put under the lock: after close() nothing enters the queue
            self._filling -= 1
            if box is not None and not self._closed:
                self._ready.put(box)
                box = None
        if box is not None:
            box.close()

    def take(self) -> DockerSandbox:
        """A started sandbox: a waiting one if its container is still alive, else a new one."""
        box = None
        while box is None:
            try:
                candidate = self._ready.get_nowait()
            except queue.Empty:
                break
            if candidate.lost_reason() is None:
                box = candidate
            else:
                candidate.close()
        self._fill()
        return box or DockerSandbox(**self._options)

    @property
    def waiting(self) -> int:
        """Started sandboxes ready to be taken now."""
        return self._ready.qsize()

    def close(self) -> None:
        """Close every waiting sandbox; ones still starting close themselves when they finish."""
        with self._lock:
            self._closed = True
        while True:
            try:
                self._ready.get_nowait().close()
            except queue.Empty:
                return

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
