"""The executor seam without a cluster: threads run jobs, lost workers become retried episodes, and the
Ray executor refuses what cannot cross processes before it starts anything."""

from __future__ import annotations

import threading
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from openenv.errors import BadRequest
from openenv.eval.runner import EvalPlan, run_eval
from openenv.executor import EngineSpec, ThreadExecutor, WorkerContext, make_executor
from openenv.executor.preflight import node_problems, probe_engine
from openenv.train.failures import FailurePolicy, run_group
from openenv.train.rollout import RolloutConfig


@dataclass(frozen=True)
class _Job:
    label: str
    outcome: str = "ok"

    def run(self, context: WorkerContext) -> dict[str, str]:
        return {"label": self.label, "node": context.node_id, "thread": threading.current_thread().name}

    def lost(self, reason: str) -> dict[str, str]:
        return {"label": self.label, "error": reason}


def test_the_thread_executor_runs_each_job_on_an_episode_thread_with_the_shared_server():
    shared = object()
    executor = ThreadExecutor(2, capture=lambda _spec: shared)  # type: ignore[arg-type, return-value]
    seen: list[object] = []

    @dataclass(frozen=True)
    class Capturing(_Job):
        def run(self, context: WorkerContext) -> dict[str, str]:
            seen.append(context.capture(EngineSpec()))
            return super().run(context)

    try:
        results = [executor.submit(Capturing(f"job{i}")).result(10) for i in range(3)]
    finally:
        executor.close()
    assert [r["label"] for r in results] == ["job0", "job1", "job2"]
    assert all(r["thread"].startswith("episode") and r["node"].startswith("local:") for r in results)
    assert seen == [shared] * 3


def test_make_executor_rejects_an_unknown_kind_and_zero_slots():
    with pytest.raises(BadRequest, match="'thread' or 'ray'"):
        make_executor("gpu", slots=1, engine=EngineSpec(), harnesses=[])  # type: ignore[arg-type]
    with pytest.raises(BadRequest, match="at least 1 slot"):
        ThreadExecutor(0)


def test_the_local_backend_is_refused_on_ray_with_what_to_do_instead():
    with pytest.raises(BadRequest, match="cannot use it.*--backend vllm"):
        EngineSpec(backend="local").check_remote()
    with pytest.raises(BadRequest, match="needs the engine URL"):
        EngineSpec(backend="vllm").check_remote()
    with pytest.raises(ValueError, match="executor='ray' needs a vllm engine"):
        RolloutConfig(executor="ray", engine=EngineSpec("local"))
    # refused before Ray is even contacted
    with pytest.raises(BadRequest, match="inside one process"):
        make_executor(
            "ray", slots=1, engine=EngineSpec(backend="local"), harnesses=["pi"], address="127.0.0.1:1"
        )


def test_node_checks_name_each_missing_piece(tmp_path: Path):
    empty = tmp_path / "no-model"
    empty.mkdir()
    problems = node_problems(
        EngineSpec(model=str(tmp_path / "absent"), vllm_urls=("http://127.0.0.1:9",)),
        ["pi", "no-such-harness"],
    )
    text = "\n".join(problems)
    assert f"tokenizer folder {tmp_path / 'absent'} does not exist" in text
    assert "harness 'no-such-harness'" in text
    assert "engine at http://127.0.0.1:9 is unreachable" in text
    assert "has no tokenizer" in node_problems(EngineSpec(model=str(empty)), [])[0]
    assert probe_engine("http://127.0.0.1:9", timeout_s=2) is not None


def test_a_docker_run_needs_a_docker_engine_on_the_node(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-docker.sock")
    [problem] = node_problems(EngineSpec(), ["pi"], sandbox="docker")
    assert problem.startswith("the run uses Docker sandboxes, but no Docker engine answers"), problem
    assert node_problems(EngineSpec(), ["pi"]) == []  # a local-sandbox run does not ask for Docker


class _LosingExecutor:
    """Loses the first attempt of every job the way a dead Ray worker does, then runs it on a thread."""

    kind = "ray"
    slots = 2

    def __init__(self) -> None:
        self.inner = ThreadExecutor(2)
        self.attempts: dict[str, int] = {}
        self.lock = threading.Lock()

    def submit(self, job):  # type: ignore[no-untyped-def]
        with self.lock:
            self.attempts[job.label] = self.attempts.get(job.label, 0) + 1
            first = self.attempts[job.label] == 1
        if first:
            future: Future[object] = Future()
            future.set_result(job.lost("WorkerLost: the worker on node 127.0.0.2 died mid-episode"))
            return future
        return self.inner.submit(job)

    def fetch(self, node: str, path: str) -> bytes:
        return Path(path).read_bytes()

    def close(self) -> None:
        self.inner.close()


@dataclass
class _Flaky:
    label: str
    fails: int
    calls: list[int] = field(default_factory=list)

    def run(self, context: WorkerContext):  # type: ignore[no-untyped-def]
        from openenv.train.episode import TrainingEpisodeResult
        from openenv.train.sequences import TrainedRows

        self.calls.append(1)
        ok = len(self.calls) > self.fails
        return TrainingEpisodeResult(
            harness="pi",
            task_id=self.label,
            policy="sample",
            error=None if ok else "boom",
            trained=TrainedRows(_row() if ok else None),
        )

    def lost(self, reason: str):  # type: ignore[no-untyped-def]
        from openenv.train.episode import TrainingEpisodeResult

        return TrainingEpisodeResult(harness="pi", task_id=self.label, policy="sample", error=reason)


def _row():  # type: ignore[no-untyped-def]
    from openenv.capture.trajectory import SequenceRow

    return SequenceRow(prompt_ids=[1], completion_ids=[2], logprobs=[-1.0], env_mask=[1], turn_ids=["t"])


def test_a_group_retries_a_lost_worker_like_any_failed_episode_and_counts_every_attempt():
    executor = _LosingExecutor()
    jobs = [_Flaky("a", fails=0), _Flaky("b", fails=0)]
    try:
        outcome = run_group(executor, jobs, FailurePolicy(max_retries=2)).result(10)
    finally:
        executor.close()
    assert outcome.attempts == [2, 2] and not outcome.masked
    assert [len(j.calls) for j in jobs] == [1, 1]  # the lost attempts never ran an episode here


def test_eval_reruns_an_episode_whose_worker_was_lost_and_keeps_one_result(tmp_path: Path, monkeypatch):
    from openenv.eval import episodes
    from openenv.testing.results import episode_summary

    ran: list[str] = []

    def fake_episode(request, out_dir, *, server=None):  # type: ignore[no-untyped-def]
        ran.append(request.task)
        out_dir.mkdir(parents=True, exist_ok=True)
        path = out_dir / f"{request.task}.jsonl"
        path.write_text("{}\n")
        summary = episode_summary(
            harness=request.harness, task=request.task, policy=request.policy, reward=1.0
        )
        return episodes.EvalEpisodeResult(episode_id=request.task, summary=summary, trajectory=str(path))

    monkeypatch.setattr("openenv.eval.runner.run_recorded_episode", fake_episode)
    executor = _LosingExecutor()
    plan = EvalPlan(harnesses=["pi"], tasks=["t1", "t2"], concurrency=2)
    try:
        results = run_eval(plan, tmp_path, executor=executor)  # type: ignore[arg-type]
    finally:
        executor.close()
    assert sorted(ran) == ["t1", "t2"]  # each ran once, after its lost first attempt
    assert [r.error for r in results] == [None, None] and executor.attempts == {"pi/t1": 2, "pi/t2": 2}
    assert all(Path(r.trajectory).parent == tmp_path / "episodes" for r in results)  # fetched home


@pytest.mark.slow
@pytest.mark.vllm
def test_a_training_episode_runs_in_a_docker_sandbox_through_the_executor(
    vllm_url: str, docker_base_image: str
):
    """`RolloutConfig(sandbox="docker")` reaches the job: the same job a Ray worker runs, here on a thread."""
    import time

    import docker

    from openenv.capture.canonical import SamplingParams
    from openenv.capture.engine import start_capture_server
    from openenv.harness.episode_settings import EpisodeSettings
    from openenv.harness.sandbox.sweeper import KIND_LABEL, OWNER_LABEL, owner_label
    from openenv.harness.tasks import builtin_task
    from openenv.train.episode_job import TrainingEpisodeJob

    engine = EngineSpec(vllm_urls=(vllm_url,))
    server = start_capture_server(engine)
    client, mine, seen = docker.from_env(), owner_label(), set()
    job = TrainingEpisodeJob(
        harness="pi",
        task=builtin_task("fix-temperature-conversion"),
        policy="oracle",
        engine=engine,
        settings=EpisodeSettings(sampling=SamplingParams(max_tokens=64), sandbox="docker"),
    )
    executor = ThreadExecutor(1, capture=lambda _spec: server)
    try:
        future = executor.submit(job)
        while not future.done():
            seen |= {
                c.id
                for c in client.containers.list(sparse=True, filters={"label": KIND_LABEL})
                if (c.attrs.get("Labels") or {}).get(OWNER_LABEL) == mine
            }
            time.sleep(0.2)
        result = future.result()
    finally:
        executor.close()
        server.stop()
    assert (result.error, result.reward) == (None, 1.0), result
    assert result.row is not None and sum(result.row.env_mask) > 0
    assert seen  # it ran in a container of ours
    left = [
        c
        for c in client.containers.list(all=True, sparse=True, filters={"label": KIND_LABEL})
        if (c.attrs.get("Labels") or {}).get(OWNER_LABEL) == mine
    ]
    client.close()
    assert left == []
