"""`RayExecutor`: episodes on `EpisodeWorker` actors across a Ray cluster (`pip install 'openenv-harness[ray]'`).

One actor per episode slot. Each node says how many slots it offers with a custom resource
(`ray start ... --resources '{"openenv_episode_slot": 8}'`), so a node never runs more harnesses than
it has cores and memory for; actors are spread over the nodes. The driver sends a job (a few hundred
bytes) to an idle actor and gets back the episode's result (the training row, reward components,
stats, node id: kilobytes); the full trajectory stays in the worker's folder until `fetch` asks for it.

Faults: when an actor or its node dies mid-episode, the episode's future resolves to `job.lost(...)`,
a failed result the caller's policy retries (on another actor: the dead one is out of the pool), and a
replacement actor is started where the cluster has room. What dead workers left on a host (harness
processes, sandbox folders) is swept by a live worker on that host, at once and again at `close()`.
`close()` also runs on the driver's SIGTERM and at exit.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import queue
import signal
import threading
import time
import uuid
from collections import deque
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from openenv.errors import BadRequest, EnvError
from openenv.executor.base import EngineSpec, EpisodeJob, ExecutorKind
from openenv.executor.worker import EpisodeWorker

__all__ = ["SLOT_RESOURCE", "ClusterNotReady", "RayExecutor"]

SLOT_RESOURCE = "openenv_episode_slot"
log = logging.getLogger(__name__)


class ClusterNotReady(EnvError):
    """The cluster cannot run this run: no slots, or nodes that lack what the episodes need."""


@dataclass
class _Actor:
    handle: Any
    info: dict[str, str]
    job: EpisodeJob | None = None
    started: float = 0.0


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        from openenv.extras import install_hint

        raise BadRequest(f"the Ray executor needs Ray: {install_hint('ray')}") from None
    return ray


class RayExecutor:
    """Runs jobs on `EpisodeWorker` actors of a Ray cluster.

    Args:
        address: the cluster (`auto`, `127.0.0.1:6390`, `ray://...`); None starts a one-node cluster here.
        engine: the engine spec every worker checks at start (the jobs carry their own copy).
        harnesses: the harness names the run uses; every worker checks their CLIs.
        slots: how many actors (episodes at once); default: every slot the cluster offers.
        slot_resource: the custom resource that caps slots per node (None: no cap, one CPU-free actor
            per slot anywhere).
        artifacts: the folder, on every node, for trajectories and sandboxes (default /tmp/openenv-ray).
        run_id: names the run's folders (default: random).
        start_timeout_s: how long the actors may take to start and pass their checks.
        max_replacements: how many dead actors are replaced over the run (default: `slots`).
        sandbox: the run's sandbox kind; with `docker` every node must have a Docker engine (checked at start).

    Raises:
        BadRequest: Ray is missing, or the `local` backend (it cannot cross processes).
        ClusterNotReady: no slot resource, too few slots, or nodes that failed their checks (named).
    """

    kind: ExecutorKind = "ray"

    def __init__(
        self,
        address: str | None = "auto",
        *,
        engine: EngineSpec,
        harnesses: Sequence[str],
        slots: int | None = None,
        slot_resource: str | None = SLOT_RESOURCE,
        artifacts: str | Path | None = None,
        run_id: str | None = None,
        start_timeout_s: float = 180.0,
        max_replacements: int | None = None,
        sandbox: str = "local",
    ) -> None:
        engine.check_remote()
        ray = self._ray = _import_ray()
        self._owns_ray = not ray.is_initialized()
        if self._owns_ray:
            try:
                ray.init(
                    address=address, include_dashboard=False, log_to_driver=False, configure_logging=False
                )
            except ConnectionError as exc:
                raise ClusterNotReady(
                    f"no Ray cluster at {address!r} ({exc}); start one with `ray start --head` "
                    "or pass its address (--ray HOST:PORT)"
                ) from None
        self.engine, self.harnesses, self.sandbox = engine, list(harnesses), sandbox
        self.run_id = run_id or uuid.uuid4().hex[:10]
        self.artifacts = str(artifacts or "/tmp/openenv-ray")
        self.slot_resource = slot_resource
        self.slots = self._slot_count(slots)
        self._lock = threading.Lock()
        self._idle: deque[_Actor] = deque()
        self._busy: dict[int, _Actor] = {}
        self._queue: deque[tuple[EpisodeJob, Future[Any]]] = deque()
        self._dead: list[dict[str, str]] = []
        self._live: list[_Actor] = []
        self._history: list[dict[str, str]] = []
        self._replacements_left = self.slots if max_replacements is None else max_replacements
        self._closed = False
        self.lost = 0  # episodes whose worker died under them
        # Ray runs future callbacks on its own threads, where a blocking Ray call (kill, a new actor) can
        # stall every other callback: they only queue the work, and this thread does it.
        self._events: queue.SimpleQueue[Any] = queue.SimpleQueue()
        threading.Thread(target=self._handle_events, name="openenv-ray-events", daemon=True).start()
        self._start_actors(start_timeout_s)
        self._install_exit_hooks()

    # ---- the executor contract ----------------------------------------------------------------------

    def submit(self, job: EpisodeJob) -> Future[Any]:
        future: Future[Any] = Future()
        with self._lock:
            if self._closed:
                raise RuntimeError("the Ray executor is closed")
            self._queue.append((job, future))
        self._dispatch()
        return future

    def fetch(self, result_node: str, path: str) -> bytes:
        """A file a worker on node `result_node` wrote; read by a live worker there.

        Raises:
            EnvError: no live worker is left on that node (its files went with it).
        """
        with self._lock:
            actor = next((a for a in self._live if a.info["node_id"] == result_node), None)
        if actor is None:
            raise EnvError(f"no live worker on node {result_node[:12]} to read {path} from")
        return self._ray.get(actor.handle.read.remote(path))

    def running(self) -> list[tuple[str, str]]:
        """`(node ip, job label)` of each episode in flight now (progress displays, fault tests)."""
        with self._lock:
            return [(a.info["node_ip"], a.job.label) for a in self._busy.values() if a.job is not None]

    def workers(self) -> list[dict[str, str]]:
        """Every worker this run started, dead ones included (`EpisodeWorker.info()`: node, owner, folders)."""
        with self._lock:
            return [dict(info) for info in self._history]

    def nodes(self) -> dict[str, str]:
        """Node id -> address of every live worker."""
        with self._lock:
            return {a.info["node_id"]: a.info["node_ip"] for a in self._live}

    def close(self) -> None:
        """Cancel queued jobs, stop every worker (its proxies and sandboxes), sweep dead workers' leftovers."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            queued, self._queue = list(self._queue), deque()
            live = list(self._live)
        for _job, future in queued:
            future.cancel()
        ray = self._ray
        with contextlib.suppress(Exception):
            ray.wait([a.handle.shutdown.remote() for a in live], num_returns=len(live), timeout=30)
        self._sweep(live)
        for actor in live:
            with contextlib.suppress(Exception):
                ray.kill(actor.handle)
        self._events.put(None)
        if self._owns_ray:
            with contextlib.suppress(Exception):
                ray.shutdown()

    # ---- internals ----------------------------------------------------------------------------------

    def _slot_count(self, wanted: int | None) -> int:
        if self.slot_resource is None:
            if wanted is None:
                raise BadRequest("without a slot resource, pass slots= (how many episodes at once)")
            return wanted
        offered = int(self._ray.cluster_resources().get(self.slot_resource, 0))
        if offered == 0:
            raise ClusterNotReady(
                f"no node of the cluster offers the {self.slot_resource!r} resource, which caps the episodes a "
                f"node runs at once; start each node with `ray start ... --resources "
                f"'{{\"{self.slot_resource}\": N}}'` (N: episodes it may run at once)"
            )
        if wanted is not None and wanted > offered:
            raise ClusterNotReady(
                f"{wanted} episode slots asked for, but the cluster offers {offered} "
                f"({self.slot_resource!r}); add nodes or lower the concurrency"
            )
        return wanted or offered

    def _actor_class(self) -> Any:
        options: dict[str, Any] = {
            "num_cpus": 0,
            "max_restarts": 0,
            "max_concurrency": 4,
            "scheduling_strategy": "SPREAD",
        }
        if self.slot_resource is not None:
            options["resources"] = {self.slot_resource: 1}
        return self._ray.remote(EpisodeWorker).options(**options)

    def _new_actor(self) -> Any:
        return self._actor_class().remote(
            self.run_id, self.engine, self.harnesses, self.artifacts, self.sandbox
        )

    def _start_actors(self, timeout_s: float) -> None:
        ray = self._ray
        handles = [self._new_actor() for _ in range(self.slots)]
        pending = {h.info.remote(): h for h in handles}
        ready, waiting = ray.wait(list(pending), num_returns=len(pending), timeout=timeout_s)
        problems: list[str] = []
        for ref in ready:
            try:
                self._live.append(_Actor(pending[ref], ray.get(ref)))
            except ray.exceptions.RayError as exc:
                problems.append(_root_cause(exc))
        if waiting:
            problems.append(
                f"{len(waiting)} of {self.slots} workers did not start within {timeout_s:g} s "
                "(no node with a free slot? see `ray status`)"
            )
        if problems:
            for handle in handles:
                with contextlib.suppress(Exception):
                    ray.kill(handle)
            unique = list(dict.fromkeys(problems))
            raise ClusterNotReady("the Ray cluster is not ready for this run:\n  - " + "\n  - ".join(unique))
        self._idle.extend(self._live)
        self._history.extend(a.info for a in self._live)

    def _dispatch(self) -> None:
        """Pair idle workers with queued jobs."""
        while True:
            with self._lock:
                if not self._idle or not self._queue:
                    return
                actor, (job, future) = self._idle.popleft(), self._queue.popleft()
                if not future.set_running_or_notify_cancel():
                    self._idle.appendleft(actor)
                    continue
                actor.job, actor.started = job, time.monotonic()
                self._busy[id(actor)] = actor
            ref = actor.handle.run.remote(job)
            ref.future().add_done_callback(
                lambda done, a=actor, j=job, f=future: self._events.put(lambda: self._finished(a, j, f, done))
            )

    def _handle_events(self) -> None:
        while True:
            event = self._events.get()
            if event is None:
                return
            try:
                event()
            except Exception:  # one bad event must not stop the dispatcher
                log.exception("the Ray executor's event handler failed")

    def _finished(self, actor: _Actor, job: EpisodeJob, future: Future[Any], done: Future[Any]) -> None:
        ray = self._ray
        try:
            result = done.result()
        except (
            ray.exceptions.RayActorError,
            ray.exceptions.WorkerCrashedError,
            ray.exceptions.NodeDiedError,
            ray.exceptions.ObjectLostError,
        ) as exc:
            self._worker_died(actor, exc)
            future.set_result(
                job.lost(
                    f"WorkerLost: the worker on node {actor.info['node_ip']} died mid-episode "
                    f"({type(exc).__name__}); the episode is retried elsewhere"
                )
            )
            self._dispatch()
            return
        except Exception as exc:
            future.set_result(job.lost(f"{type(exc).__name__}: {_root_cause(exc)}"))
        else:
            future.set_result(result)
        with self._lock:
            self._busy.pop(id(actor), None)
            actor.job = None
            if not self._closed:
                self._idle.append(actor)
        self._dispatch()

    def _worker_died(self, actor: _Actor, exc: BaseException) -> None:
        log.warning("episode worker on %s died: %s", actor.info.get("node_ip"), exc)
        with self._lock:
            self.lost += 1
            self._busy.pop(id(actor), None)
            if actor in self._live:
                self._live.remove(actor)
            self._dead.append(actor.info)
            replace = not self._closed and self._replacements_left > 0
            self._replacements_left -= replace
            live = list(self._live)
        threading.Thread(target=self._bury, args=(actor, live), name="openenv-sweep", daemon=True).start()
        if replace:
            self._replace()

    def _bury(self, actor: _Actor, live: list[_Actor]) -> None:
        """Make sure a worker judged dead is (unreachable is not always dead, and its episode must not
        finish behind our back), then sweep what it left. Off the event thread: `ray.kill` may block."""
        with contextlib.suppress(Exception):
            self._ray.kill(actor.handle, no_restart=True)
        self._sweep(live)

    def _replace(self) -> None:
        """Start a replacement where the cluster has a free slot; it joins the pool once its checks pass."""
        handle = self._new_actor()

        def joined(done: Future[Any]) -> None:
            try:
                info = done.result()
            except Exception as exc:
                log.warning("a replacement episode worker did not start: %s", _root_cause(exc))
                return
            actor = _Actor(handle, info)
            with self._lock:
                if self._closed:
                    closed = True
                else:
                    closed = False
                    self._history.append(info)
                    self._live.append(actor)
                    self._idle.append(actor)
            if closed:
                with contextlib.suppress(Exception):
                    self._ray.kill(handle)
                return
            self._dispatch()

        handle.info.remote().future().add_done_callback(lambda done: self._events.put(lambda: joined(done)))

    def _sweep(self, live: list[_Actor]) -> None:
        """Ask one live worker per host to remove dead workers' leftovers there."""
        with self._lock:
            owners = [(d["owner"], d["tmp"]) for d in self._dead]
        if not owners:
            return
        hosts: dict[str, _Actor] = {}
        for actor in live:
            hosts.setdefault(actor.info["owner"].partition("/")[0], actor)
        refs = [a.handle.sweep.remote(owners) for a in hosts.values()]
        with contextlib.suppress(Exception):
            for report in self._ray.get(refs, timeout=60):
                if report.processes or report.folders:
                    log.warning(
                        "swept %d processes and %d folders of dead workers on %s",
                        len(report.processes),
                        len(report.folders),
                        report.host,
                    )

    def _install_exit_hooks(self) -> None:
        atexit.register(self.close)
        if threading.current_thread() is not threading.main_thread():
            return
        previous = signal.getsignal(signal.SIGTERM)

        def on_sigterm(signum: int, frame: Any) -> None:
            self.close()
            if callable(previous):
                previous(signum, frame)
            else:
                raise SystemExit(128 + signum)

        signal.signal(signal.SIGTERM, on_sigterm)


def _root_cause(exc: BaseException) -> str:
    """The first line a user needs from a Ray error (the actor's own exception message, if any)."""
    text = str(exc)
    for marker in ("NodeNotReady: ", "ClusterNotReady: "):
        if marker in text:
            return text.split(marker, 1)[1].strip().splitlines()[0]
    return text.strip().splitlines()[-1] if text.strip() else type(exc).__name__
