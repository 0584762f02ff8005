"""TRL's harness trainer on `openenv serve harbor`: a `ResourceSessionFactory` over the reference's `HarborEnv`.

Runs in the TRAINER's venv, which holds TRL (`trl==1.16.0`) and the reference OpenEnv (`openenv==0.10.0`),
never ours (both import as `openenv`). Our server runs in our venv:

    openenv serve harbor --tasks ./tasks --backend vllm --vllm-url http://127.0.0.1:8000 --token "$T"

and the trainer hands this factory to TRL's worker:

    from functools import partial
    from trl.experimental.async_grpo.openenv_harness import HarnessRolloutWorker
    from harbor_trl_factory import HarborSessionFactory
    factory = partial(HarborSessionFactory, "http://127.0.0.1:8765", token=T, harness="pi", sandbox="local")
    worker = HarnessRolloutWorker(harness_session_factory=factory, ...)  # loop-owning: no harness_adapter

TRL calls `factory(sampling=training_sampling(...))` (its temperature, the truncating knobs at their no-op
values; the server refuses anything else), then per rollout `create(prompt, seed=group_id, episode_id=...)`,
`wait_for_completion()`, `fetch_training_trace()` (the reference's validated `TrainingTrace`: per turn the
prompt ids, completion ids, logprobs and full loss mask, exactly as the server captured them), `verify()`
(the verifier's reward, forwarded, never recomputed) and `close()`. TRL hands `create` the row's prompt and
the group id as `seed`; the task is `seed % num_tasks` of the split, or the row's own `task_index` (and
`split`) when `create` gets a dict, as the Task API lists them (`HarborEnv.get_task_range`).

Every generation of a group plays the same task (TRL passes the group id as `seed`). A rollout our side
could not finish (`ok=False`) raises from `wait_for_completion`, which TRL scores as unscorable: excluded,
never a 0.
"""

from __future__ import annotations

from typing import Any

from openenv.core.harness import (
    ResourceSession,
    ResourceSessionFactory,
    TrainingTrace,
    TrainingTurn,
    VerifyResult,
)
from openenv.core.harness.rollout import ToolResult
from openenv.harbor.client import HarborEnv
from openenv.harbor.models import HarborRolloutResult

__all__ = ["HarborSession", "HarborSessionFactory"]


class HarborSession(ResourceSession):
    """One rollout on the server: run as one `run_rollout` call when TRL waits for completion."""

    def __init__(self, factory: HarborSessionFactory, task: Any, seed: int | None = None) -> None:
        self._factory = factory
        self._task = task if isinstance(task, dict) else {"prompt": task}
        self._seed = seed
        self.result: HarborRolloutResult | None = None
        self._env: HarborEnv | None = None

    def initial_messages(self) -> list[dict[str, Any]]:
        prompt = self._task.get("prompt")
        return list(prompt) if isinstance(prompt, list) else []

    def list_tools(self) -> list[Any]:
        return []  # the harness owns its tools; nothing is exposed to TRL's loop

    def call_tool(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        return ToolResult(error=f"{name}: the harness runs its own tools inside the server's sandbox")

    def wait_for_completion(self, timeout_s: float | None = None) -> int:
        """Run the rollout (once) and return its number of turns.

        Raises:
            RuntimeError: the server refused the rollout, or our side failed it (`ok=False`).
        """
        if self.result is None:
            f = self._factory
            self._env = HarborEnv(base_url=f.base_url, headers=f.headers)
            split = str(self._task.get("split", f.split))
            index = self._task.get("task_index")
            if index is None:  # TRL passes the prompt and the group id: a group's rollouts play one task
                index = (self._seed or 0) % self._env.num_tasks(split)
            self.result = self._env.run_rollout(
                split=split,
                task_index=int(index),
                harness=f.harness,
                sandbox=f.sandbox,
                sampling=f.sampling or None,
                agent_timeout_sec=float(timeout_s or f.agent_timeout_sec),
                agent_step_limit=f.agent_step_limit,
            )
        if not self.result.ok:
            raise RuntimeError(f"rollout failed on the server: {self.result.error}")
        return self.result.n_turns

    def fetch_training_trace(self) -> TrainingTrace:
        """The trainable turns as the reference's validated `TrainingTrace` (ids, logprobs, full masks)."""
        assert self.result is not None, "wait_for_completion() first"
        return TrainingTrace(
            turns=[
                TrainingTurn(
                    node_id=t.node_id,
                    prompt_token_ids=t.prompt_token_ids,
                    completion_token_ids=t.completion_token_ids,
                    per_token_logps=t.per_token_logps,
                    loss_mask=list(t.loss_mask or []),
                    request={"messages": t.request_messages},
                    response={
                        "choices": [
                            {
                                "message": {
                                    "role": "assistant",
                                    "content": t.text,
                                    "tool_calls": [
                                        {"function": {"name": c["name"], "arguments": c.get("arguments", "")}}
                                        for c in t.tool_calls
                                    ],
                                }
                            }
                        ]
                    },
                    metadata={"turn": t.turn, "finish_reason": t.finish_reason},
                )
                for t in self.result.turns
                if t.trainable and not t.discarded
            ]
        )

    def verify(self, transcript: list[dict[str, Any]], final_state: Any | None = None) -> VerifyResult:
        result = self.result
        return VerifyResult(
            env_reward=None if result is None else result.reward,
            done=result is not None,
            metrics={} if result is None else {"wall_s": result.wall_s, **result.phase_timings},
        )

    def close(self) -> None:
        if self._env is not None:
            self._env.close()
            self._env = None


class HarborSessionFactory(ResourceSessionFactory[HarborSession]):
    """Sessions on one `openenv serve harbor` server.

    Args:
        base_url: the server, e.g. `http://127.0.0.1:8765`.
        token: its token (sent on the WebSocket and `/mcp`; the Task API may not need it).
        harness, sandbox, split: what every rollout runs (a row may name its own `split`).
        sampling: TRL's training policy (`training_sampling(...)`), passed as `sampling=` by its worker.
    """

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        harness: str = "pi",
        sandbox: str = "local",
        split: str = "",
        sampling: dict[str, Any] | None = None,
        agent_timeout_sec: float = 0.0,
        agent_step_limit: int = 0,
    ) -> None:
        self.base_url = base_url
        self.headers = {"Authorization": f"Bearer {token}"} if token else None
        self.harness, self.sandbox, self.split = harness, sandbox, split
        self.sampling = dict(sampling or {})
        self.agent_timeout_sec, self.agent_step_limit = agent_timeout_sec, agent_step_limit

    def create(self, task: Any, seed: int | None = None, episode_id: str | None = None) -> HarborSession:
        return HarborSession(self, task, seed)
