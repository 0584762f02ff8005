"""`HarborService`: what one `openenv serve harbor` holds for its life: the splits, the operator's rollout
policy, the rollout cap, and where episode logs go. Every transport (the WebSocket's `call_tool` step,
`/mcp`'s `tools/call`) reaches rollouts through `run_rollout` here, so they share one cap and one set of
checks.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openenv.capture.engine import CapturePool
from openenv.harbor_server.admission import ORACLE, REFERENCE_SANDBOXES, SANDBOXES, RolloutPolicy
from openenv.harbor_server.rollout import run_admitted
from openenv.harbor_server.splits import Splits
from openenv.harbor_server.wire import HarborRolloutResult

__all__ = ["RUN_ROLLOUT_ARGS", "HarborService"]

# `run_rollout`'s arguments, with the reference client's defaults (`openenv.harbor.client.HarborEnv`).
RUN_ROLLOUT_ARGS: dict[str, Any] = {
    "split": "",
    "task_index": 0,
    "harness": "opencode",
    "sandbox": "e2b",
    "reward_key": "",
    "keep_sandbox": False,
    "force_build": False,
    "llm_url": "",
    "model": "",
    "api_key": "",
    "auth_header": "",
    "provider": "openai",
    "purpose": "auto",
    "eval_sampling": None,
    "agent_timeout_sec": 0.0,
    "agent_step_limit": 0,
    "sampling": None,
}


@dataclass
class HarborService:
    """Args:
    splits: the served task sets.
    policy: the operator's rules for what a rollout may ask (engines, sandboxes, sampling).
    max_rollouts: rollouts that run at once; later ones wait their turn (their wait is `queue_s`).
    runs_dir: where each episode's JSONL log is written (None: not written).
    pool: the capture servers its rollouts sample through, one per engine; whoever serves the service
        closes it when serving ends (`openenv harbor serve` does).
    """

    splits: Splits
    policy: RolloutPolicy
    max_rollouts: int = 1
    runs_dir: Path | None = None
    running: int = 0
    pool: CapturePool = field(default_factory=CapturePool, repr=False)
    _slots: asyncio.Semaphore | None = field(default=None, repr=False)
    _docker: str | None = field(default="unchecked", repr=False)

    async def run_rollout(self, arguments: dict[str, Any]) -> HarborRolloutResult:
        """One rollout, start to finish.

        Raises:
            BadRequest: an argument this server refuses (admission) or an unknown argument name.
            NotFound / IndexError: an unknown split or task index.
        """
        from openenv.errors import BadRequest

        unknown = sorted(set(arguments) - set(RUN_ROLLOUT_ARGS))
        if unknown:
            raise BadRequest(f"run_rollout got unknown argument(s): {', '.join(unknown)}")
        args = {**RUN_ROLLOUT_ARGS, **arguments}
        admitted = self.policy.admit(args)
        index = args["task_index"]
        if isinstance(index, bool) or not isinstance(index, int):
            raise BadRequest(f"task_index must be a whole number, got {index!r}")
        try:
            split = self.splits.split(str(args["split"] or ""))
            task = self.splits.task(split, index)
        except IndexError as exc:
            raise BadRequest(str(exc)) from None
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.max_rollouts)
        waited = time.monotonic()
        async with self._slots:
            self.running += 1
            try:
                return await run_admitted(
                    admitted,
                    task,
                    split=split,
                    harness_word=str(args["harness"]),
                    reward_key=str(args["reward_key"] or ""),
                    runs_dir=self.runs_dir,
                    queued_s=time.monotonic() - waited,
                    image_substitutes=dict(self.policy.image_substitutes),
                    pool=self.pool,
                )
            finally:
                self.running -= 1

    def capabilities(self) -> dict[str, Any]:
        """What this server runs, in the reference's `capabilities` shape (harnesses, sandboxes, datasets,
        llm), plus ours only: `max_rollouts`, `running` and `allowed_llm_urls`."""
        from openenv.harness.catalog import get_spec, harness_names

        harnesses = [
            {
                "name": ORACLE,
                "dialect": "",
                "kind": "base",
                "status": "validated",
                "needs_subclass": False,
                "notes": f"the task's solution/solve.sh through {self.policy.oracle_harness} (--policy oracle)",
            }
        ]
        for name in harness_names():
            harnesses.append(
                {
                    "name": name,
                    "dialect": get_spec(name).dialect,
                    "kind": "installed",
                    "status": "validated",
                    "needs_subclass": False,
                    "notes": "",
                }
            )
        sandboxes = [
            {"name": "local", "available": True, "detail": "this machine (bubblewrap)"},
            {
                "name": "docker",
                "available": self._docker_reason() is None,
                "detail": self._docker_reason() or "a container per episode",
            },
        ]
        sandboxes += [
            {"name": n, "available": False, "detail": "not offered by this server"}
            for n in REFERENCE_SANDBOXES
        ]
        engine = self.policy.engine
        return {
            "harnesses": harnesses,
            "sandboxes": sandboxes,
            "datasets": self.splits.listing(),
            "llm": {
                "ok": True,
                "backend": engine.backend,
                "urls": list(engine.vllm_urls),
                "model": str(engine.folder()),
                "capture_level": "tokens",
            },
            "allowed_llm_urls": list(self.policy.allowed_llm_urls),
            "sandbox_names": list(SANDBOXES),
            "max_rollouts": self.max_rollouts,
            "running": self.running,
        }

    def capabilities_json(self) -> str:
        return json.dumps(self.capabilities())

    def _docker_reason(self) -> str | None:
        if self._docker == "unchecked":
            try:
                from openenv.harness.sandbox.docker_engine import engine_available

                self._docker = engine_available()
            except ModuleNotFoundError as exc:
                self._docker = f"the Python package {exc.name!r} is not installed"
        return self._docker
