"""TRL's harness trainer road on our server: TRL 1.16.0's own `_HarnessRolloutLoop._run_session` (the body of
`HarnessRolloutWorker`, loop-owning mode) over `examples/harbor_trl_factory.py`'s `HarborSessionFactory`,
in the reference's venv (TRL imports the reference's `openenv.core.harness`), against `openenv serve harbor`.

TRL builds the factory with its own `training_sampling(...)`, plays a rollout through `create`,
`wait_for_completion`, `fetch_training_trace` (the reference's validated `TrainingTrace`), `verify`, and
turns the turns into training rows with its own `_turns_from_training_trace` and `_chain_to_sequences`.
Those rows must be exactly ours: the JSONL log the server wrote for the same episode.

What does not run here (no CUDA): `AsyncGRPOTrainer.__init__` (`get_peak_flops_per_device` calls
`torch.cuda.get_device_name`), its NCCL weight transfer, and the worker's `_run_loops` (it starts from the
trainer's process and streams weights); see docs/interop.md.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.interop.test_harbor_road import REPO, TOKEN, Served, served  # noqa: F401  (the module's server)


@pytest.fixture(scope="module")
def trl_reference(reference: Any) -> Any:
    proc = reference.proc("import trl.experimental.async_grpo.openenv_harness")
    if proc.returncode != 0:
        pytest.skip(f"TRL 1.16.0 is not in the reference venv (scripts/install_reference.sh): {proc.stderr[-300:]}")
    return reference


def test_trl_run_session_rows_equal_ours(trl_reference: Any, served: Served) -> None:
    model = os.environ.get("OPENENV_TINY_MODEL") or str(REPO / ".cache" / "tiny-model")
    out = trl_reference.run(f"""
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
    """, timeout=900)
    assert out["sampling"]["temperature"] == 1.0 and out["sampling"]["top_p"] == 1.0  # TRL's training_sampling
    assert out["ok"] is True and out["reward"] is not None and out["turns"]
    assert out["sequences"], "TRL built no training row from the rollout"
    lines = [json.loads(line) for line in (served.runs / f"{out['trial']}.jsonl").read_text().splitlines()]
    rows = [line for line in lines if line["type"] == "sequence"]
    ours = [[r["prompt_ids"] + r["completion_ids"], [0] * len(r["prompt_ids"]) + r["env_mask"],
             [0.0] * len(r["prompt_ids"]) + r["logprobs"]] for r in rows if any(r["env_mask"])]
    assert out["sequences"] == ours
    assert sum(sum(s[1]) for s in out["sequences"]) == out["n_trainable"] == len(out["completion_ids"])
