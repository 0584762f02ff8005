"""What one machine sustains: real harness episodes through openenv vs the same harness CLI on its own.

    .venv/bin/python bench/bench_episode.py [--harnesses pi,claude-code,codex] [--concurrency 1,4]
                                            [--rounds 2] [--task fix-temperature-conversion]
                                            [--model-s 0] [--json]

Episodes per node, the high levels (issue 48; ~20 min on 2 idle cores, run them on a quiet machine):

    .venv/bin/python bench/bench_episode.py --harnesses pi,claude-code,codex --concurrency 16,32 \
        --rounds 1 --json > episodes-16-32.json
    .venv/bin/python bench/bench_episode.py --render episodes-16-32.json

For each harness and each concurrency `c`, side by side in the same run (the two alternate, so load
drifts hit both):

- **openenv**: batches of `c` concurrent oracle episodes, each run the way `openenv eval` does
  (`run_recorded_episode`: a bubblewrap `LocalSandbox` on a loopback-only network, the gated capture
  proxy, the oracle's replies scored by the engine, the verifier, the JSONL log). The engine is
  `bench/engines.py instant` (answers at once), so what is measured is the harness plus us.
- **floor**: the same harness CLI, same config, same task files, started directly (no sandbox, no
  proxy; run as root, in a loopback-only network namespace where only the stand-in's port answers,
  as openenv's sandbox gives the harness: on the host's network codex sends DNS queries of its own)
  against a stand-in model server that answers each request with the oracle's reply at once,
  in the harness's own wire format (OpenAI Chat or Anthropic Messages, streamed), then the task's
  tests run plainly in its folder (`episode_floor.py`). That is the harness's own cost, and the cost of
  knowing whether it solved the task: what we cannot go below. The tests' CPU and wall are timed apart,
  so the ratios are given against the CLI alone and against the CLI plus its tests.

`--model-s S` gives every policy turn S seconds of model time on both sides (the floor's server sleeps
before answering; openenv sleeps before answering a non-aux turn): 0 (the default) measures every
fixed cost of an episode magnified; a few seconds, what a training run against a real model sees.

Reported per harness and concurrency: episodes per minute, wall seconds per episode, CPU seconds per
episode (this process and every process it started, counted by a `cpuacct` cgroup this process moves
into: a sandbox's processes end by `cgroup.kill` and are never reaped, so `os.times()` would lose
them; the stand-in engines are started before and stay outside, on both sides; the bench's own
measuring, its memory sampler and openenv's phase timers, is taken out; openenv's sandbox folders,
removed on a background thread, are gone before its batch ends; the kernel's own workers, such as a
network namespace's teardown, are in no cgroup and counted on neither side), and peak RSS per
concurrent episode (sampled every 0.25 s: the harness process trees, plus for openenv what this
process, i.e. the proxy and the env, grew above its idle size). The overhead is openenv / floor (goal
<= 1.15x). Where openenv's time goes (per episode, exclusive wall seconds, and CPU seconds at c=1):
sandbox set-up, harness start (config, setup commands, spawn), waiting on the harness (its own work and
the proxy's request parsing), answering turns (the proxy: the oracle's reply tokenized, scored,
encoded), the verifier, tear-down, and the rest (session open, log writing); and beside them the wall
seconds the stand-in engine's calls took (the model's time: it scores every oracle reply, `prompt_logprobs`
over the whole prompt, which the floor's model never does). The 1-minute load average
is recorded with every row: on a shared machine read the CPU columns before the wall ones. Needs root
(bubblewrap sandboxes as root, the cgroup) and the harness CLIs installed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Self

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from episode_floor import floor_episode, floor_network, oracle_app
from episode_report import PHASES, ratios, render

TASK = "fix-temperature-conversion"


# ---- measuring ----------------------------------------------------------------------------------------


class Phases:
    """Exclusive wall seconds per phase, per thread (nested sections subtract from their parent), and the
    CPU seconds the whole run spent meanwhile (the episode's own only when one episode runs at a time)."""

    def __init__(self) -> None:
        self._local = threading.local()

    def reset(self) -> None:
        self._local.totals = defaultdict(float)
        self._local.cpu = defaultdict(float)
        self._local.stack = []

    def totals(self) -> dict[str, float]:
        return dict(getattr(self._local, "totals", {}))

    def cpu(self) -> dict[str, float]:
        return dict(getattr(self._local, "cpu", {}))

    @contextlib.contextmanager
    def section(self, name: str) -> Iterator[None]:
        stack = getattr(self._local, "stack", None)
        if stack is None:  # a thread we do not measure
            yield
            return
        with _bookkeeping():
            stack.append([0.0, 0.0])
            start, cpu0 = time.perf_counter(), _cpu()[1]
        try:
            yield
        finally:
            with _bookkeeping():
                elapsed, cpu = time.perf_counter() - start, _cpu()[1] - cpu0
                child_wall, child_cpu = stack.pop()
                self._local.totals[name] += elapsed - child_wall
                self._local.cpu[name] += cpu - child_cpu
                if stack:
                    stack[-1][0] += elapsed
                    stack[-1][1] += cpu

    def wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            with self.section(name):
                return fn(*args, **kwargs)

        return timed


def instrument(phases: Phases, model_s: float = 0.0) -> None:
    """Time the env's phases by wrapping its module-level helpers and methods (this process only); give
    each policy turn `model_s` of model time before it is answered."""
    from openenv.harness import environment as env_mod

    cls = env_mod.HarnessEnvironment
    if model_s:
        answer = cls._answer

        def paced(self: Any, episode: Any, action: Any) -> None:
            if not episode.pending.aux:
                time.sleep(model_s)
            answer(self, episode, action)

        cls._answer = paced
    # The stand-in engine's own wall time (its replies built and sent), summed over every call: what a
    # turn waits for that is the model's, not ours. The oracle's replies are scored (`prompt_logprobs`
    # over the whole prompt, ~12k rows for codex), which the floor's model never does.
    from openenv.capture.backends.vllm import VLLMBackend

    raw_post = VLLMBackend._raw_post

    async def timed_post(self: Any, body: dict[str, Any]) -> tuple[int, bytes]:
        start = time.perf_counter()
        try:
            return await raw_post(self, body)
        finally:
            ENGINE.add(time.perf_counter() - start)

    VLLMBackend._raw_post = timed_post
    cls._local_sandbox = phases.wrap("sandbox", cls._local_sandbox)
    env_mod.stage_workspace = phases.wrap("sandbox", env_mod.stage_workspace)
    env_mod._stage_solution = phases.wrap("sandbox", env_mod._stage_solution)
    env_mod.launch = phases.wrap("harness_start", env_mod.launch)
    env_mod.verify = phases.wrap("verifier", env_mod.verify)
    cls._advance = phases.wrap("harness_wait", cls._advance)
    cls._answer = phases.wrap("proxy_answer", cls._answer)
    cls._release = phases.wrap("teardown", cls._release)


class Sampler:
    """Peak summed RSS of this process's descendants (minus `exclude`) and of this process's growth."""

    def __init__(self, exclude: set[int], interval: float = 0.25) -> None:
        import psutil

        self._me = psutil.Process()
        self._exclude = exclude
        self._interval = interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.idle_rss = self._me.memory_info().rss
        self.peak_children = 0
        self.peak_self_growth = 0
        self.cpu_s = 0.0

    def _tick(self) -> None:
        import psutil

        total = 0
        for child in self._me.children(recursive=True):
            if child.pid in self._exclude:
                continue
            with contextlib.suppress(psutil.Error):
                total += child.memory_info().rss
        self.peak_children = max(self.peak_children, total)
        self.peak_self_growth = max(self.peak_self_growth, self._me.memory_info().rss - self.idle_rss)

    def _run(self) -> None:
        start = time.thread_time()
        while not self._stop.wait(self._interval):
            self._tick()
        self.cpu_s = time.thread_time() - start

    def __enter__(self) -> Self:
        self.idle_rss = self._me.memory_info().rss
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        assert self._thread is not None
        self._thread.join()


class CpuGroup:
    """A cgroup-v1 `cpuacct` group this process moves into, so every process it starts from now on is
    counted, wherever it runs and however it ends: a sandbox's processes killed by `cgroup.kill` are
    never reaped by us, so `os.times()` loses them. Without a writable `cpuacct` hierarchy, falls back
    to `os.times()` (this process + reaped children; says so)."""

    def __init__(self) -> None:
        mount = next(
            (
                Path(line.split()[1])
                for line in Path("/proc/mounts").read_text().splitlines()
                if line.split()[2] == "cgroup" and "cpuacct" in line.split()[3].split(",")
            ),
            None,
        )
        self.path: Path | None = None
        self._home: Path | None = None
        if mount is None:
            return
        own = next(
            (
                line.split(":", 2)[2]
                for line in Path("/proc/self/cgroup").read_text().splitlines()
                if "cpuacct" in line.split(":", 2)[1].split(",")
            ),
            "/",
        )
        home, path = mount / own.lstrip("/"), mount / own.lstrip("/") / f"openenv-bench-{os.getpid()}"
        try:
            path.mkdir()
            (path / "cgroup.procs").write_text(str(os.getpid()))
        except OSError:
            with contextlib.suppress(OSError):
                path.rmdir()
            return
        self.path, self._home = path, home

    @property
    def kind(self) -> str:
        return "cpuacct cgroup" if self.path else "os.times (this process + reaped children only)"

    def seconds(self) -> float:
        if self.path is not None:
            return int((self.path / "cpuacct.usage").read_text()) / 1e9
        t = os.times()
        return t.user + t.system + t.children_user + t.children_system

    def close(self) -> None:
        if self.path is None or self._home is None:
            return
        (self._home / "cgroup.procs").write_text(str(os.getpid()))
        for _ in range(100):  # children still exiting keep it busy a moment
            try:
                self.path.rmdir()
                return
            except OSError:
                time.sleep(0.05)


CPU: CpuGroup | None = None


class _Total:
    """Seconds summed from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.seconds = 0.0

    def add(self, seconds: float) -> None:
        with self._lock:
            self.seconds += seconds


ENGINE = _Total()
# CPU seconds this bench spent timing openenv's phases (reading the cgroup's counter twice a phase, ~45 us):
# the bench's, not openenv's, so taken out of openenv's side as the memory sampler's CPU is.
BOOKKEEPING = _Total()


@contextlib.contextmanager
def _bookkeeping() -> Iterator[None]:
    """Count this thread's CPU inside the block as the bench's own measuring (`BOOKKEEPING`)."""
    own = time.thread_time()
    try:
        yield
    finally:
        BOOKKEEPING.add(time.thread_time() - own)


def _cpu() -> tuple[float, float]:
    t = os.times()
    total = CPU.seconds() if CPU is not None else t.user + t.system + t.children_user + t.children_system
    return t.user + t.system, total


def _batch(
    run_one: Callable[[], dict[str, Any]], concurrency: int, exclude: set[int], *, count_self: bool
) -> dict[str, Any]:
    """`concurrency` episodes at once: their results, the batch's wall, CPU and peak memory."""
    load = os.getloadavg()[0]
    self0, all0 = _cpu()
    engine0, bookkeeping0 = ENGINE.seconds, BOOKKEEPING.seconds
    start = time.perf_counter()
    with Sampler(exclude) as sampler, ThreadPoolExecutor(concurrency) as pool:
        episodes = [f.result() for f in [pool.submit(run_one) for _ in range(concurrency)]]
        if count_self:
            # openenv removes its sandbox folders on a background thread (`reaper.py`, ~6 CPU-ms a codex
            # episode): that work is its episodes', so it ends inside their batch. Left to run on, half of
            # it fell in the next batch, the floor's every other round.
            from openenv.harness.sandbox import reaper

            reaper.drain()
    wall = time.perf_counter() - start
    self1, all1 = _cpu()
    peak = sampler.peak_children + (max(0, sampler.peak_self_growth) if count_self else 0)
    ours = sampler.cpu_s + BOOKKEEPING.seconds - bookkeeping0  # the bench's own measuring
    return {
        "episodes": episodes,
        "wall_s": wall,
        "cpu_s": all1 - all0 - ours,
        "engine_s": ENGINE.seconds - engine0,
        "self_cpu_s": self1 - self0 - ours,
        "bookkeeping_s": ours,
        "peak_mb": peak / 1e6,
        "load_1m": load,
        "self_growth_mb": sampler.peak_self_growth / 1e6,
    }


def _summary(batches: list[dict[str, Any]], concurrency: int) -> dict[str, Any]:
    """One side's batches at one concurrency, per episode."""
    episodes = [e for b in batches for e in b["episodes"]]
    n, wall = len(episodes), sum(b["wall_s"] for b in batches)
    return {
        "episodes": n,
        "wall_s": wall,
        "episodes_per_min": 60 * n / wall,
        "wall_per_episode_s": sum(e["wall_s"] for e in episodes) / n,
        "cpu_per_episode_s": sum(b["cpu_s"] for b in batches) / n,
        # per batch, in round order, for the ratios' intervals (`episode_report.interval`)
        "batch_cpu_s": [b["cpu_s"] / len(b["episodes"]) for b in batches],
        "batch_wall_s": [sum(e["wall_s"] for e in b["episodes"]) / len(b["episodes"]) for b in batches],
        "self_cpu_per_episode_s": sum(b["self_cpu_s"] for b in batches) / n,
        "engine_wall_per_episode_s": sum(b.get("engine_s", 0.0) for b in batches) / n,
        "peak_mb_per_episode": max(b["peak_mb"] for b in batches) / concurrency,
        "ok": sum(1 for e in episodes if e["ok"]),
        "load_1m": sum(b["load_1m"] for b in batches) / len(batches),
        "grading_wall_per_episode_s": sum(e.get("grading_wall_s", 0.0) for e in episodes) / n,
        "grading_cpu_per_episode_s": sum(e.get("grading_cpu_s", 0.0) for e in episodes) / n,
        "phases": {p: sum(e.get("phases", {}).get(p, 0.0) for e in episodes) / n for p in PHASES},
        "phase_cpu": {p: sum(e.get("phase_cpu", {}).get(p, 0.0) for e in episodes) / n for p in PHASES},
        "self_growth_mb": max(b["self_growth_mb"] for b in batches),
        "errors": [e["error"] for e in episodes if e.get("error")][:3],
    }


# ---- the two sides -------------------------------------------------------------------------------------


def openenv_episode(
    harness: str, task_id: str, server: Any, engine_url: str, logs: Path, phases: Phases
) -> dict[str, Any]:
    """One `openenv eval` episode (oracle policy) on this thread, with its phases timed."""
    from openenv.capture.engine import EngineSpec
    from openenv.eval.episodes import EpisodeRequest, run_recorded_episode

    phases.reset()
    with _bookkeeping():
        start, cpu0 = time.perf_counter(), _cpu()[1]
    engine = EngineSpec.of("vllm", vllm_url=engine_url)
    request = EpisodeRequest(harness=harness, task=task_id, engine=engine, policy="oracle")
    try:
        result = run_recorded_episode(request, logs, server=server)
        error = None if result.summary.reward == 1.0 else f"reward {result.summary.reward}: {result.summary}"
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
    wall = time.perf_counter() - start
    times = phases.totals()
    times["other"] = max(0.0, wall - sum(times.values()))
    cpu = phases.cpu()
    cpu["other"] = max(0.0, _cpu()[1] - cpu0 - sum(cpu.values()))
    return {"ok": error is None, "error": error, "wall_s": wall, "phases": times, "phase_cpu": cpu}


def _serve(argv: list[str]) -> tuple[subprocess.Popen[bytes], str]:
    """A stand-in (`argv` under our interpreter) on a free port, once its /health answers."""
    import servers

    from openenv.errors import TransportError

    try:
        server = servers.spawn(
            lambda port: [sys.executable, *argv, "--port", str(port)], "/health", timeout=240
        )  # a loaded shared box
    except TransportError as exc:
        raise SystemExit(f"{argv}: {exc}") from exc
    return server.proc, server.base


def run(
    harnesses: list[str],
    concurrency: list[int],
    rounds: int,
    task: str,
    on_row: Callable[[dict[str, Any]], None] = lambda row: None,
    model_s: float = 0.0,
) -> dict[str, Any]:
    from openenv.capture.backends.vllm import VLLMBackend
    from openenv.capture.server import CaptureServer
    from openenv.models import tiny_model_path

    phases = Phases()
    instrument(phases, model_s)
    engine, engine_url = _serve([str(REPO / "bench" / "engines.py"), "instant"])
    oracle, oracle_url = _serve([__file__, "--serve-oracle", "--model-s", str(model_s)])
    logs = Path(tempfile.mkdtemp(prefix="openenv-bench-episode-"))
    rows: list[dict[str, Any]] = []
    load_before = os.getloadavg()
    global CPU
    CPU = CpuGroup()  # after the stand-in engines started: they stay outside it
    try:
        server = CaptureServer(backend=VLLMBackend(engine_url), model=tiny_model_path()).start()
        exclude = {engine.pid, oracle.pid}
        net = floor_network(oracle_url)  # the floor's CLI reaches only its stand-in, as openenv's does
        enter = net.enter_argv() if net is not None else None
        try:
            for harness in harnesses:
                ours = lambda h=harness: openenv_episode(h, task, server, engine_url, logs, phases)
                floor = lambda h=harness: floor_episode(h, task, oracle_url, grade=True, enter=enter)
                warm = [ours(), floor()]  # tokenizer, first sandbox, Node's compile cache
                if not all(w["ok"] for w in warm):
                    raise SystemExit(f"{harness}: the warm-up episode failed: {[w['error'] for w in warm]}")
                for c in concurrency:
                    # Paired batches, the order alternating: a load swing on this shared machine hits both.
                    sides = {"floor": (floor, False), "openenv": (ours, True)}
                    batches: dict[str, list[dict[str, Any]]] = {"floor": [], "openenv": []}
                    for r in range(rounds):
                        for side in ("floor", "openenv") if r % 2 == 0 else ("openenv", "floor"):
                            fn, count_self = sides[side]
                            batches[side].append(_batch(fn, c, exclude, count_self=count_self))
                    for side in ("floor", "openenv"):
                        row = {
                            "harness": harness,
                            "concurrency": c,
                            "side": side,
                            **_summary(batches[side], c),
                        }
                        rows.append(row)
                        on_row(row)
        finally:
            server.stop()
            if net is not None:
                net.close()
    finally:
        CPU.close()
        for proc in (engine, oracle):
            proc.terminate()
            proc.wait(10)
        shutil.rmtree(logs, ignore_errors=True)
    return {
        "task": task,
        "rounds": rounds,
        "model_s": model_s,
        "rows": rows,
        "ratios": ratios(rows),
        "cpu_counted_by": CPU.kind,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "load_before": load_before,
        "load_after": os.getloadavg(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--harnesses", default="pi,claude-code,codex")
    parser.add_argument(
        "--concurrency",
        default="1,4",
        help="episodes at once, comma-separated (issue 48's levels: 1,4,16,32)",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=2,
        help="paired batches (c episodes each side, the order alternating) per concurrency",
    )
    parser.add_argument(
        "--render",
        nargs="+",
        type=Path,
        metavar="JSON",
        help="print the markdown of earlier --json reports (one per harness), merged",
    )
    parser.add_argument("--task", default=TASK)
    parser.add_argument(
        "--model-s",
        type=float,
        default=0.0,
        help="seconds of model time per policy turn, on both sides (0: an instant model, every fixed "
        "cost magnified; 2-5: a real model's reply)",
    )
    parser.add_argument("--json", action="store_true", help="print the raw report as JSON")
    parser.add_argument("--serve-oracle", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_oracle:
        import uvicorn

        uvicorn.run(
            oracle_app(args.model_s), host="127.0.0.1", port=args.port, log_level="warning", access_log=False
        )
        return

    if args.render:
        parts = [json.loads(path.read_text()) for path in args.render]
        rows = [r for part in parts for r in part["rows"]]
        print(
            render({**parts[0], "rows": rows, "ratios": ratios(rows), "load_after": parts[-1]["load_after"]})
        )
        return

    def show(row: dict[str, Any]) -> None:
        print(
            f"  {row['harness']:12} c={row['concurrency']} {row['side']:8} {row['episodes_per_min']:6.1f}/min "
            f"{row['wall_per_episode_s']:6.2f} s/ep {row['cpu_per_episode_s']:6.2f} CPU-s/ep "
            f"{row['peak_mb_per_episode']:5.0f} MB/ep ok {row['ok']}/{row['episodes']} "
            f"load {row['load_1m']:.1f} {row['errors'] or ''}",
            file=sys.stderr,
        )

    report = run(
        args.harnesses.split(","),
        [int(c) for c in args.concurrency.split(",")],
        args.rounds,
        args.task,
        on_row=show,
        model_s=args.model_s,
    )
    print(json.dumps(report, indent=1) if args.json else render(report))


if __name__ == "__main__":
    main()
