"""An asyncio event loop on a daemon thread, so sync code can drive async code (and servers) in-process.

The sync env client, the embedded capture proxy, `LocalServer`, the fault-injecting proxy and the unix
socket bridge each need one: `LoopThread` is the loop, `ServerThread` is uvicorn servers on one.
`on_loop` and `call_on_loop` are the two cross-loop hops for any loop (a capture session's, which may
belong to no `LoopThread`); this module is the one place that crosses loops.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Coroutine, Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, Self, TypeVar

if TYPE_CHECKING:
    import uvicorn

__all__ = ["LoopThread", "ServerThread", "call_on_loop", "on_loop", "shared_loop"]

T = TypeVar("T")


class LoopThread:
    """An event loop running on its own daemon thread until `stop()`.

    Args:
        name: the thread's name (shows in stack dumps and `py-spy`).
        loop_factory: makes the loop (e.g. uvicorn's uvloop choice); default: a plain asyncio loop.

    Example:
        with LoopThread("worker") as loop:
            reply = loop.run(fetch(url), timeout=10)
    """

    def __init__(
        self, name: str, *, loop_factory: Callable[[], asyncio.AbstractEventLoop] | None = None
    ) -> None:
        self.name = name
        self._loop_factory = loop_factory
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            raise RuntimeError(f"loop thread {self.name!r} is not started; call start() first")
        return self._loop

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self, timeout: float = 10.0) -> Self:
        """Start the thread; returns once its loop runs."""
        self._thread = threading.Thread(target=self._main, name=self.name, daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout):
            raise RuntimeError(f"loop thread {self.name!r} did not start within {timeout:g} s")
        return self

    def _main(self) -> None:
        # asyncio.Runner cancels and awaits whatever is left on the loop when it ends, so open
        # connections close now rather than as "Task was destroyed but it is pending!" at collection.
        with asyncio.Runner(loop_factory=self._loop_factory) as runner:
            runner.run(self._serve())

    async def _serve(self) -> None:
        self._stopping = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        self._ready.set()
        await self._stopping.wait()

    def submit(self, coro: Coroutine[Any, Any, T]) -> Future[T]:
        """Schedule `coro` on the loop from any thread; the future holds its result."""
        if self._loop is None or not self.running:
            coro.close()
            raise RuntimeError(f"loop thread {self.name!r} is not running; call start() first")
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run `coro` on the loop and wait for its result (from any thread but the loop's own).

        Raises:
            RuntimeError: called on the loop's own thread, where waiting would deadlock.
            TimeoutError: no result within `timeout` seconds.
        """
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError(f"a blocking call cannot run on loop thread {self.name!r}; await it instead")
        return self.submit(coro).result(timeout)

    async def arun(self, coro: Coroutine[Any, Any, T]) -> T:
        """Await `coro` on this loop from whichever loop the caller is on."""
        if self._loop is None or not self.running:
            coro.close()
            raise RuntimeError(f"loop thread {self.name!r} is not running; call start() first")
        return await on_loop(self._loop, coro)

    def stop(self, timeout: float = 10.0) -> None:
        """End the loop (tasks still on it are cancelled) and wait for the thread. Idempotent."""
        thread, loop, stopping = self._thread, self._loop, self._stopping
        if thread is None:
            return
        if loop is not None and stopping is not None and thread.is_alive():
            loop.call_soon_threadsafe(stopping.set)
        if thread is not threading.current_thread():
            thread.join(timeout)
        self._thread = self._loop = self._stopping = None
        self._ready.clear()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class ServerThread:
    """uvicorn servers served together on one `LoopThread` (uvicorn's own loop choice: uvloop if installed).

    Args:
        servers: the servers; they share the loop (and so the app state's event loop).
        name: the thread's name.
    """

    def __init__(self, servers: Sequence[uvicorn.Server], name: str) -> None:
        self.servers = list(servers)
        self.loop_thread = LoopThread(name, loop_factory=self.servers[0].config.get_loop_factory())
        self._serving: Future[Any] | None = None

    def start(self, timeout: float) -> bool:
        """Serve; returns True once every socket accepts connections, False if one failed or timed out."""
        self.loop_thread.start(timeout)
        self._serving = self.loop_thread.submit(_serve_all(self.servers))
        deadline = time.monotonic() + timeout
        # uvicorn exits (SystemExit) when it cannot bind: the loop's thread then ends, and with it the wait.
        while not self.started and not self._serving.done() and self.loop_thread.running:
            if time.monotonic() > deadline:
                break
            time.sleep(0.01)
        return self.started

    @property
    def started(self) -> bool:
        return all(s.started for s in self.servers)

    def stop(self, timeout: float = 10.0) -> None:
        """Ask uvicorn to shut down (running the apps' lifespan exit), then end the loop."""
        for server in self.servers:
            server.should_exit = True
        if self._serving is not None and self.loop_thread.running:
            with contextlib.suppress(Exception):  # a server that failed to start has nothing left to stop
                self._serving.result(timeout)
        self.loop_thread.stop(timeout)


async def on_loop(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, T]) -> T:
    """Await `coro` on `loop` from whichever loop we are on (at once when it is ours)."""
    if _running_loop() is loop:
        return await coro
    return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, loop))


_shared: dict[str, LoopThread] = {}
_shared_lock = threading.Lock()


def shared_loop(name: str) -> LoopThread:
    """The process's one running `LoopThread` called `name`, started on first use (and again if it
    stopped): for many short-lived users (sync clients, sandboxes' listeners) that each stopping a loop
    of their own would cost a thread join."""
    with _shared_lock:
        loop = _shared.get(name)
        if loop is None or not loop.running:
            loop = _shared[name] = LoopThread(name).start()
        return loop


def call_on_loop(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, T], timeout: float | None) -> T:
    """Run `coro` on `loop` from any other thread and wait for it (at most `timeout` seconds).

    Raises:
        RuntimeError: called on `loop` itself, where waiting would deadlock.
        TimeoutError: no result within `timeout` seconds.
    """
    if _running_loop() is loop:
        coro.close()
        raise RuntimeError(
            "a blocking call cannot wait on its own event loop (a sync session method on the "
            "server's loop); await the async one instead"
        )
    return asyncio.run_coroutine_threadsafe(coro, loop).result(timeout)


async def _serve_all(servers: Sequence[uvicorn.Server]) -> None:
    await asyncio.gather(*(s.serve() for s in servers))


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
