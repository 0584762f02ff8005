"""One owner of capture-server lifetimes: a `CapturePool`. Whoever starts a road opens one, every server of
the road comes from it (the same spec, the same server), and the road's end closes it: no server, thread
or port outlives the road."""

from __future__ import annotations

import ast
import socket
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import openenv
from openenv.capture.engine import CapturePool, EngineSpec
from openenv.capture.server import CaptureServer

NOWHERE = ("http://127.0.0.1:9",)  # nothing is sampled here: a server starts without asking its engine


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture
def acquired(monkeypatch: pytest.MonkeyPatch) -> list[tuple[CapturePool, CaptureServer]]:
    """Every server any pool hands out, with its pool."""
    seen: list[tuple[CapturePool, CaptureServer]] = []
    real = CapturePool.acquire

    def spy(self: CapturePool, spec: EngineSpec, **kwargs: Any) -> CaptureServer:
        server = real(self, spec, **kwargs)
        seen.append((self, server))
        return server

    monkeypatch.setattr(CapturePool, "acquire", spy)
    return seen


def test_one_spec_one_server_and_closing_the_pool_frees_its_ports_and_threads(tiny_model: Path) -> None:
    threads = threading.active_count()
    with CapturePool() as pool:
        first = pool.acquire(EngineSpec("vllm", str(tiny_model), NOWHERE))
        assert pool.acquire(EngineSpec.of("vllm", model=tiny_model, vllm_url="http://127.0.0.1:9/")) is first
        other = pool.acquire(EngineSpec("vllm", str(tiny_model), ("http://127.0.0.1:10",)))
        assert other is not first and pool.servers() == [first, other]
        ports = [first.port, other.port]
        assert all(_listening(p) for p in ports)
    assert not any(_listening(p) for p in ports)
    assert threading.active_count() <= threads
    with pytest.raises(RuntimeError, match="closed"):
        pool.acquire(EngineSpec("vllm", str(tiny_model), NOWHERE))


def test_the_eval_road_takes_its_server_from_its_pool_and_closes_it_when_it_ends(
    tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, acquired: list[Any]
) -> None:
    from openenv.eval import runner
    from openenv.eval.runner import EvalPlan, run_eval

    got: list[CaptureServer] = []

    def episode(request: Any, logs: Path, *, server: CaptureServer) -> Any:
        got.append(server)
        return runner.EvalEpisodeJob(request=request, logs=str(logs), engine=request.engine).lost("stand-in")

    monkeypatch.setattr(runner, "run_recorded_episode", episode)
    engine = EngineSpec("vllm", str(tiny_model), NOWHERE)
    plan = EvalPlan(harnesses=["pi"], tasks=["t1", "t2", "t3"], engine=engine, concurrency=2)
    run_eval(plan, tmp_path)
    assert (
        len(got) == 3 and {id(s) for s in got} == {id(s) for _, s in acquired} and len(set(map(id, got))) == 1
    )
    assert not _listening(got[0].port)  # the run ended: its pool stopped the server


def test_the_training_road_takes_its_policy_server_from_its_pool_and_closes_it(
    tiny_model: Path, acquired: list[Any]
) -> None:
    from openenv.train.rollout import HarnessRollout, RolloutConfig

    trainer = SimpleNamespace(args=SimpleNamespace(vllm_server_base_url="http://127.0.0.1:9"))
    rollout = HarnessRollout(RolloutConfig(engine=EngineSpec("vllm", model=str(tiny_model))))
    rollout.executor(trainer)
    [(pool, server)] = acquired
    assert pool.servers() == [server] and _listening(server.port)
    rollout.close()
    assert not _listening(server.port) and pool.servers() == []


def test_no_road_starts_a_capture_server_but_through_a_pool() -> None:
    """Outside `openenv.capture`, nothing builds or starts a capture server itself. The two that still do
    are named with why: the soak's per-slot server sits behind a fault proxy and a relay of its own, and
    `openenv proxy` serves in the foreground with its own uvicorn (issue 46 item 3 leaves them)."""
    root = Path(openenv.__file__).parent
    starts = {}
    for path in sorted(root.rglob("*.py")):
        if path.is_relative_to(root / "capture"):
            continue
        calls = [
            ast.unparse(node.func)
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Call)
            and ast.unparse(node.func).split(".")[-1]
            in ("start_capture_server", "CaptureServer", "_SoakServer", "CaptureSessionRegistry")
        ]
        if calls:
            starts[str(path.relative_to(root))] = sorted(set(calls))
    assert starts == {"soak/runner.py": ["_SoakServer"], "cli/proxy.py": ["CaptureSessionRegistry"]}
