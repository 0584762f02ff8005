"""A loopback-only network namespace made by this process, with the proxy's ports listening inside it.

The local sandbox's default network is a namespace with only `lo`. The proxy listens on the host's
127.0.0.1, so something must carry its port into that namespace. The first way (`forwarder.py`) ran a
Python forwarder inside every sandboxed command and made the command wait until it listened: 44 ms of
wall time before each harness could start, and 0.02 CPU-s per episode (issue 48). Run as root, this
process can do it without any process inside: a short-lived thread `unshare`s a new network namespace,
brings its `lo` up and binds the listening sockets there (a socket belongs to the namespace it was made
in), then ends. The namespace lives on through a file descriptor, the listeners are served on this
process's loop, each connection spliced to the proxy on the host's 127.0.0.1, and the sandbox's commands
join the namespace through `nsenter` before bubblewrap starts.

What the sandbox can reach is what it could before: `lo`, and on it the proxy's ports only. The namespace
belongs to the host's user namespace, so the sandbox's uid (no capabilities, and no way to make a user
namespace where it would have some) cannot reconfigure it. `close()` stops the listeners and drops the descriptor: the commands
that run after it (grading) get a fresh empty namespace from bubblewrap, as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import errno
import fcntl
import os
import socket
import struct
import threading

from openenv.core.loop_thread import shared_loop
from openenv.harness.forwarder import splice_handler
from openenv.harness.sandbox.isolation import system_binary

__all__ = ["LoopbackNamespace", "nsenter_binary"]

_CLONE_NEWNET = 0x40000000
_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1
_IFREQ = "16sh22x"  # struct ifreq: the name, then the flags (the rest of its 40 bytes unused here)


def nsenter_binary() -> str | None:
    return system_binary("nsenter", "/usr/bin", "/bin")


def _loopback_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        flags = struct.unpack(_IFREQ, fcntl.ioctl(s, _SIOCGIFFLAGS, struct.pack(_IFREQ, b"lo", 0)))[1]
        fcntl.ioctl(s, _SIOCSIFFLAGS, struct.pack(_IFREQ, b"lo", flags | _IFF_UP))


def _make(ports: tuple[int, ...]) -> tuple[int, list[socket.socket]]:
    """On the calling thread, which must be one of its own (it stays in the new namespace): the
    namespace's descriptor and a bound, listening socket per port."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(_CLONE_NEWNET) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"unshare(CLONE_NEWNET): {os.strerror(code)}")
    fd = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    listeners: list[socket.socket] = []
    try:
        _loopback_up()
        for port in ports:
            listener = socket.create_server(("127.0.0.1", port), backlog=128)
            listener.setblocking(False)
            listeners.append(listener)
    except BaseException:
        for listener in listeners:
            listener.close()
        os.close(fd)
        raise
    return fd, listeners


class LoopbackNamespace:
    """A network namespace with only `lo` up, where each of `ports` on 127.0.0.1 reaches the same port
    on this host's 127.0.0.1. Needs root (`CAP_SYS_ADMIN`) and `nsenter`.

    Raises:
        OSError: the namespace or a listener could not be made (not root, a seccomp filter, ...).
    """

    def __init__(self, ports: tuple[int, ...]) -> None:
        if nsenter_binary() is None:
            raise OSError(errno.ENOENT, "nsenter (util-linux) is not installed")
        made: list[tuple[int, list[socket.socket]] | BaseException] = []

        def make() -> None:  # a thread of its own: it never leaves the namespace, and it ends here
            try:
                made.append(_make(ports))
            except BaseException as exc:
                made.append(exc)

        thread = threading.Thread(target=make, name="sandbox-netns-make", daemon=True)
        thread.start()
        thread.join()
        if isinstance(made[0], BaseException):
            raise made[0]
        self._fd, listeners = made[0]
        self._loop = shared_loop(
            "sandbox-netns"
        )  # one for every namespace: a thread per sandbox cost 12 ms to stop
        self._connections: set[asyncio.Task[None]] = set()
        self._servers: list[asyncio.Server] = []
        try:
            for listener, port in zip(listeners, ports, strict=True):
                self._servers.append(self._loop.run(self._serve(listener, port), 10))
        except BaseException:
            self.close()
            for listener in listeners:
                listener.close()
            raise

    async def _serve(self, listener: socket.socket, port: int) -> asyncio.Server:
        splice = splice_handler(lambda: asyncio.open_connection("127.0.0.1", port))

        async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            task = asyncio.current_task()
            assert task is not None
            self._connections.add(task)
            try:
                await splice(reader, writer)  # both ends closed by it, also when cancelled
            except asyncio.CancelledError:
                pass  # close() cut it off: asyncio logs a handler task that ends cancelled as an error
            finally:
                self._connections.discard(task)

        return await asyncio.start_server(handler, sock=listener)

    @property
    def path(self) -> str:
        """The namespace, as a path `nsenter --net=` opens (root only: this process's descriptor)."""
        return f"/proc/{os.getpid()}/fd/{self._fd}"

    def enter_argv(self) -> list[str]:
        """The prefix that runs a command in this namespace."""
        return [nsenter_binary() or "nsenter", f"--net={self.path}", "--"]

    def close(self) -> None:
        """Stop listening, end the open connections, and drop the namespace. Idempotent."""
        servers, self._servers = self._servers, []
        if servers and self._loop.running:
            with contextlib.suppress(Exception):
                self._loop.run(self._close_all(servers), 5)
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    async def _close_all(self, servers: list[asyncio.Server]) -> None:
        for server in servers:
            server.close()
        # The loop is shared, so nothing ends these connections with it: a client still connected
        # (a daemon of the agent's that outlived it) is cut off here, with both of its sockets.
        for task in list(self._connections):
            task.cancel()
