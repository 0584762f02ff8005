"""The reference's `HarborEnv` (`openenv==0.10.0`, its own venv, unmodified) drives `openenv serve harbor`.

One server for the module, started as a user starts it (`openenv serve harbor --tasks ... --token T`), with
two splits: our Harbor fixtures and a folder holding one task whose solution never finishes (so a rollout
is still running when its client vanishes). Each test runs one script under the reference's interpreter
and reads back what the reference's own models validated: discovery as its Task API client does it (no
token), `capabilities`, an oracle rollout scoring 1, a sampled pi rollout whose trainable turns equal the
rows our log recorded, a Docker rollout, and the refusals (unknown sandbox, an engine the operator did not
allow, truncating sampling, no token). A client killed mid-rollout frees the sandbox. And TRL's own session road over it (below).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from openenv.core.net import free_port, wait_for_health
from tests.harness.e2e.conftest import require_installed

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "harbor"
TOKEN = "harbor-road-token"
ORACLE_TASK = "always-exit-zero"


def _slow_task(root: Path) -> Path:
    """A Harbor task whose solution sleeps: an oracle rollout on it runs until someone stops it."""
    task = root / "slow" / "never-finishes"
    shutil.copytree(FIXTURES / ORACLE_TASK, task)
    (task / "solution" / "solve.sh").write_text("#!/bin/bash\nsleep 900\n")
    return task.parent


class Served:
    def __init__(self, url: str, proc: subprocess.Popen[bytes], runs: Path, log: Path, slow: str) -> None:
        self.url, self.proc, self.runs, self.log, self.slow = url, proc, runs, log, slow

    def descendants(self) -> list[psutil.Process]:
        """The server's live child processes (harnesses, sandboxes), zombies aside."""
        try:
            return [
                p
                for p in psutil.Process(self.proc.pid).children(recursive=True)
                if p.status() != psutil.STATUS_ZOMBIE
            ]
        except psutil.NoSuchProcess:
            return []


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    require_installed("pi")
    root = tmp_path_factory.mktemp("harbor-serve")
    slow = _slow_task(root)
    port = free_port()
    from openenv.harness.sandbox.images import PYTHON_IMAGE

    model = os.environ.get("OPENENV_TINY_MODEL") or str(REPO / ".cache" / "tiny-model")
    cmd = [
        sys.executable,
        "-m",
        "openenv.cli.main",
        "serve",
        "harbor",
        "--tasks",
        str(FIXTURES),
        "--tasks",
        str(slow),
        "--port",
        str(port),
        "--token",
        TOKEN,
        "--model",
        model,
        "--runs-dir",
        str(root / "runs"),
        "--max-rollouts",
        "2",
        "--max-tokens",
        "48",
        "--image-substitute",
        f"python:3.11-slim={PYTHON_IMAGE}",
    ]
    log = root / "serve.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            cmd, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=out, stderr=subprocess.STDOUT
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_health(
            url,
            timeout_s=120,
            gone=lambda: (
                None
                if proc.poll() is None
                else f"openenv serve harbor exited ({proc.returncode}):\n{log.read_text()}"
            ),
        )
        yield Served(url, proc, root / "runs", log, str(slow))
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


def _client(url: str, token: str | None = TOKEN) -> str:
    headers = f", headers={{'Authorization': 'Bearer {token}'}}" if token else ""
    return f"""
        import json
        from openenv.harbor.client import HarborEnv
        from openenv.harbor.models import HarborRolloutResult
        env = HarborEnv(base_url={url!r}{headers})
    """


def test_discovery_as_the_reference_does_it_needs_no_token(reference: Any, served: Served) -> None:
    """splits, num_tasks, get_task and get_task_range through the reference client's own Task API calls
    (which send no header): on this loopback bind they answer without the token. A task is its index, its
    folder name and its instruction; no host path, test or solution."""
    out = reference.run(
        _client(served.url, token=None)
        + """
        splits = env.splits()
        name = splits[0]["name"]
        n = env.num_tasks(name)
        task = env.get_task(name, 0)
        window = env.get_task_range(name, 1, 3)
        try:
            env.get_task(name, 999)
            bad = None
        except Exception as exc:
            bad = str(exc)
        env._http.close()
        print(json.dumps({"splits": splits, "n": n, "task": task.model_dump(), "window": [t.task_id for t in window],
                          "bad": bad}))
    """
    )
    names = sorted(p.name for p in FIXTURES.iterdir() if (p / "task.toml").is_file())
    assert out["splits"] == [
        {"name": str(FIXTURES), "num_tasks": len(names)},
        {"name": served.slow, "num_tasks": 1},
    ]
    assert out["n"] == len(names)
    assert out["task"]["index"] == 0 and out["task"]["task_id"] == names[0] == out["task"]["task_name"]
    assert out["task"]["instruction"] == (FIXTURES / names[0] / "instruction.md").read_text().strip()
    assert out["window"] == names[1:3]
    assert "400" in out["bad"]


def test_capabilities_and_every_refusal_name_the_reason(reference: Any, served: Served) -> None:
    """`capabilities` lists oracle and our harnesses, our sandboxes; a rollout naming a hosted sandbox, an
    engine URL the operator did not allow (a cloud metadata address), or a truncating sampler is refused
    with the reason, through the reference client (it raises the tool's error). Nothing was run."""
    out = reference.run(
        _client(served.url)
        + """
        caps = env.capabilities()
        refusals = {}
        for name, kw in {"e2b": dict(sandbox="e2b"), "llm_url": dict(sandbox="local", llm_url="http://169.254.169.254/v1"),
                         "top_p": dict(sandbox="local", sampling={"temperature": 1.0, "top_p": 0.9}),
                         "harness": dict(sandbox="local", harness="dspy-rlm")}.items():
            try:
                env.run_rollout(split="", task_index=0, **{"harness": "oracle", **kw})
                refusals[name] = None
            except RuntimeError as exc:
                refusals[name] = str(exc)
        env.close()
        print(json.dumps({"caps": caps, "refusals": refusals}))
    """
    )
    caps = out["caps"]
    assert {"oracle", "pi", "claude-code", "codex"} <= {h["name"] for h in caps["harnesses"]}
    offered = {s["name"]: s["available"] for s in caps["sandboxes"]}
    assert offered["local"] is True and offered["e2b"] is False
    assert [d["num_tasks"] for d in caps["datasets"]][1] == 1
    ref = out["refusals"]
    assert "sandbox 'e2b' is not offered here" in ref["e2b"] and "local, docker" in ref["e2b"]
    assert "169.254.169.254" in ref["llm_url"] and "--allow-llm-url" in ref["llm_url"]
    assert "top_p=0.9 truncates" in ref["top_p"]
    assert "harness 'dspy-rlm' is not one this server runs" in ref["harness"]
    assert not list(served.runs.glob("*.jsonl")) or all("oracle" not in p.name for p in served.runs.iterdir())


def test_a_rollout_without_the_token_is_refused(reference: Any, served: Served) -> None:
    """The same client without the token: its session cannot even be opened, so no rollout starts."""
    proc = reference.proc(
        _client(served.url, token=None)
        + """
        env.run_rollout(split="", task_index=0, harness="oracle", sandbox="local")
        print("RAN")
    """,
        timeout=120,
    )
    assert proc.returncode != 0 and "RAN" not in proc.stdout
    assert "401" in proc.stderr


def test_oracle_rollout_scores_one(reference: Any, served: Served) -> None:
    """harness='oracle' (the task's solution, as `--policy oracle`) on a Harbor task: ok, reward 1 from the
    verifier, an eval rollout (scripted turns are not the policy's: nothing trainable)."""
    out = reference.run(
        _client(served.url)
        + f"""
        names = [t.task_id for t in env.get_task_range("", 0, 100)]
        r = env.run_rollout(split="", task_index=names.index({ORACLE_TASK!r}), harness="oracle", sandbox="local")
        env.close()
        print(r.model_dump_json())
    """,
        timeout=600,
    )
    assert out["ok"] is True and out["error"] is None, out
    assert out["reward"] == 1.0 and out["rewards"]["reward"] == 1.0
    assert out["task_id"] == ORACLE_TASK and out["harness"] == "oracle" and out["sandbox"] == "local"
    assert out["rollout_type"] == "eval" and out["n_trainable_tokens"] == 0
    assert out["wall_s"] > 0 and "episode_s" in out["phase_timings"]


def test_sampled_pi_rollout_turns_are_our_rows(reference: Any, served: Served) -> None:
    """harness='pi' sampled by the tiny model: ok, a reward, and every trainable turn's prompt ids,
    completion ids and logprobs are exactly the spans of the training row our log recorded (the JSONL
    `openenv run` writes too); `n_trainable_tokens` counts them, the loss mask covers only them."""
    out = reference.run(
        _client(served.url)
        + """
        r = env.run_rollout(split="", task_index=0, harness="pi", sandbox="local", sampling={"temperature": 1.0,
                            "top_p": 1.0, "top_k": -1, "min_p": 0.0, "frequency_penalty": 0.0,
                            "presence_penalty": 0.0, "repetition_penalty": 1.0}, agent_step_limit=3)
        env.close()
        print(r.model_dump_json())
    """,
        timeout=600,
    )
    assert out["ok"] is True, out
    assert out["reward"] is not None and out["rollout_type"] == "train"
    turns = [t for t in out["turns"] if t["trainable"]]
    assert turns and out["n_trainable_tokens"] == sum(len(t["completion_token_ids"]) for t in turns) > 0
    lines = [
        json.loads(line) for line in (served.runs / f"{out['trial_name']}.jsonl").read_text().splitlines()
    ]
    rows = [line for line in lines if line["type"] == "sequence"]
    for turn in turns:
        row = next(r for r in rows if turn["node_id"] in r["turn_ids"])
        full = row["prompt_ids"] + row["completion_ids"]
        n, k = len(turn["prompt_token_ids"]), len(turn["completion_token_ids"])
        assert turn["prompt_token_ids"] + turn["completion_token_ids"] == full[: n + k]
        start = n - len(row["prompt_ids"])
        assert turn["per_token_logps"] == row["logprobs"][start : start + k]
        assert turn["loss_mask"] == [0] * n + row["env_mask"][start : start + k] and all(
            row["env_mask"][start : start + k]
        )
        assert turn["sampling_params"]["temperature"] == 1.0


def test_docker_rollout_scores_one(reference: Any, served: Served) -> None:
    """sandbox='docker': the task's own image (python:3.11-slim, substituted by our offline python image
    as the operator said with --image-substitute), graded in a fresh container."""
    from openenv.harness.sandbox.docker import engine_available

    if (reason := engine_available()) is not None:
        pytest.skip(f"no Docker engine: {reason}")
    import docker

    from openenv.harness.sandbox.images import build_python_image

    subprocess.run(["bash", str(REPO / "scripts" / "build_base_image.sh")], check=True)  # offline, once
    build_python_image(docker.from_env(), progress=lambda line: None)
    out = reference.run(
        _client(served.url)
        + f"""
        names = [t.task_id for t in env.get_task_range("", 0, 100)]
        r = env.run_rollout(split="", task_index=names.index({ORACLE_TASK!r}), harness="oracle", sandbox="docker")
        env.close()
        print(r.model_dump_json())
    """,
        timeout=900,
    )
    assert out["ok"] is True and out["reward"] == 1.0 and out["sandbox"] == "docker", out


def test_a_client_gone_mid_rollout_frees_its_sandbox(reference: Any, served: Served) -> None:
    """A reference client killed while its rollout runs (an oracle whose solution sleeps 15 minutes): the
    server ends the episode at once, its harness and sandbox processes are gone, and the slot is free."""
    script = (
        _client(served.url)
        + f"""
        print("calling", flush=True)
        env.run_rollout(split={served.slow!r}, task_index=0, harness="oracle", sandbox="local")
        print("RETURNED", flush=True)
    """
    )
    import textwrap

    full_env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    proc = subprocess.Popen(
        [str(reference.python), "-I", "-c", textwrap.dedent(script)],
        cwd=reference.workdir,
        env=full_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 180
        while not any("sleep" in " ".join(p.cmdline()) for p in _alive(served)):
            assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
            assert time.monotonic() < deadline, "the slow solution never started"
            time.sleep(0.5)
    finally:
        proc.kill()
        proc.wait(timeout=30)
    deadline = time.monotonic() + 60
    while served.descendants():
        assert time.monotonic() < deadline, f"still running: {[p.cmdline() for p in served.descendants()]}"
        time.sleep(0.5)
    caps = reference.run(_client(served.url) + "\n        print(json.dumps(env.capabilities()))\n")
    assert caps["running"] == 0


def _alive(served: Served) -> list[psutil.Process]:
    out = []
    for p in served.descendants():
        try:
            p.cmdline()
            out.append(p)
        except psutil.Error:
            pass
    return out


# TRL's harness trainer road on this server: TRL 1.16.0's own `_HarnessRolloutLoop._run_session` (the body of
# `HarnessRolloutWorker`, loop-owning mode) over `examples/harbor_trl_factory.py`'s `HarborSessionFactory`, in
# the reference's venv (TRL imports the reference's `openenv.core.harness`). TRL builds the factory with its
# own `training_sampling(...)`, plays a rollout through `create`, `wait_for_completion`, `fetch_training_trace`
# (the reference's validated `TrainingTrace`), `verify`, and makes training rows with its own
# `_turns_from_training_trace` and `_chain_to_sequences`: they must be exactly the rows our log recorded.
# Not run here (no CUDA): `AsyncGRPOTrainer.__init__`, its NCCL weight transfer, the worker's `_run_loops`.


@pytest.fixture(scope="module")
def trl_reference(reference: Any) -> Any:
    proc = reference.proc("import trl.experimental.async_grpo.openenv_harness")
    if proc.returncode != 0:
        pytest.skip(
            f"TRL 1.16.0 is not in the reference venv (scripts/install_reference.sh): {proc.stderr[-300:]}"
        )
    return reference


def test_trl_run_session_rows_equal_ours(trl_reference: Any, served: Served) -> None:
    model = os.environ.get("OPENENV_TINY_MODEL") or str(REPO / ".cache" / "tiny-model")
    out = trl_reference.run(
        f"""
        import functools, json, multiprocessing as mp, sys
        sys.path.insert(0, {str(REPO / "examples")!r})
        from datasets import Dataset
        from transformers import AutoTokenizer
        from trl.experimental.async_grpo.openenv_harness import _HarnessRolloutLoop
        from harbor_trl_factory import HarborSessionFactory

        made = []
        class Recording(HarborSessionFactory):
            def create(self, task, seed=None, episode_id=None):
                made.append(super().create(task, seed, episode_id))
                return made[-1]

        tok = AutoTokenizer.from_pretrained({model!r})
        # TRL parses replies only when it samples turns itself (adapter mode); the loop-owning road reads the
        # server's tokens. The tiny model's template is not one TRL knows, so give it a schema to pass its check.
        tok.response_schema = {{"type": "object"}}
        ctx = mp.get_context("spawn")
        prompt = [{{"role": "user", "content": "fix the task"}}]
        factory = functools.partial(Recording, {served.url!r}, token={TOKEN!r}, harness="pi", sandbox="local",
                                    agent_step_limit=3)
        loop = _HarnessRolloutLoop(
            harness_session_factory=factory, model_name="tiny", dataset=Dataset.from_list([{{"prompt": prompt}}]),
            reward_funcs=[], processing_class=tok, eos_token_ids=[tok.eos_token_id], rollout_buffer=ctx.Queue(),
            model_version_value=ctx.Value("i", 0), heartbeat_value=ctx.Value("d", 0.0), failed_event=ctx.Event(),
            exception_info_queue=ctx.Queue(maxsize=1), metrics_queue=ctx.Queue(), num_generations=2, max_tokens=48,
            temperature=1.0)
        result, metrics = loop._run_session(prompt, group_id=0)
        completion, completion_ids, sequences, n_calls, n_failures, reward = result
        session = made[0]
        print(json.dumps({{"sampling": session._factory.sampling, "reward": reward, "ok": session.result.ok,
                          "trial": session.result.trial_name, "n_trainable": session.result.n_trainable_tokens,
                          "completion_ids": completion_ids, "turns": metrics["turns"] if metrics else None,
                          "sequences": [[s.input_ids, s.completion_mask, s.old_log_probs] for s in sequences]}}))
    """,
        timeout=900,
    )
    assert (
        out["sampling"]["temperature"] == 1.0 and out["sampling"]["top_p"] == 1.0
    )  # TRL's training_sampling
    assert out["ok"] is True and out["reward"] is not None and out["turns"]
    assert out["sequences"], "TRL built no training row from the rollout"
    lines = [json.loads(line) for line in (served.runs / f"{out['trial']}.jsonl").read_text().splitlines()]
    rows = [line for line in lines if line["type"] == "sequence"]
    ours = [
        [
            r["prompt_ids"] + r["completion_ids"],
            [0] * len(r["prompt_ids"]) + r["env_mask"],
            [0.0] * len(r["prompt_ids"]) + r["logprobs"],
        ]
        for r in rows
        if any(r["env_mask"])
    ]
    assert out["sequences"] == ours
    assert sum(sum(s[1]) for s in out["sequences"]) == out["n_trainable"] == len(out["completion_ids"])
