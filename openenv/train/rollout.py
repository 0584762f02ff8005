"""The `rollout_func` for TRL's `GRPOTrainer`: each prompt names a task, and harness episodes answer it.

    trainer = GRPOTrainer(model=..., args=GRPOConfig(num_generations=4, ...), train_dataset=task_dataset([...]),
                          reward_funcs=default_reward_funcs(), rollout_func=HarnessRollout(RolloutConfig(harness="pi")))

TRL passes the batch's prompts with each prompt repeated `num_generations` times in a row; every run of
`num_generations` prompts is a **group**. A group's episodes run in one harness (the prompt's, or one
drawn from the mix), concurrently on a pool bounded by `max_concurrency`, each in a fresh sandbox. The
return value has one row per prompt: `prompt_ids`, `completion_ids`, `logprobs`, `env_mask` (the
episode's primary training sequence, see `sequences.py`), its other sequences in `branch_rows` (trained
by `EpisodeGRPOTrainer`), the row weights, plus the reward components as extra columns for the reward
functions (`rewards.py`). Failed episodes follow `failures.py`. Per-harness metrics go to TRL's
logs (`metrics.py`).

Where episodes run is the executor's business (`openenv.executor`): `executor="thread"` runs them on
threads here, sharing the policy server; `executor="ray"` sends each one to an `EpisodeWorker` actor on a
Ray cluster (`ray_address`), next to that worker's own proxy, sampling from the vLLM engine(s) at
`vllm_url`. Group planning, the harness mix, retry-or-mask and staleness stay here on the driver.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from openenv.capture.engine import CapturePool
from openenv.capture.server import CaptureServer
from openenv.errors import BadRequest
from openenv.executor import EngineSpec, EpisodeExecutor, ExecutorKind, make_executor
from openenv.harness.episode_settings import EpisodeSettings, fold_words
from openenv.harness.tasks.model import Task
from openenv.harness.tasks.sets import load_task_set
from openenv.train.episode import EpisodePolicy, RowTokens, TrainingEpisodeResult
from openenv.train.episode_job import EnvBuilder, TrainingEpisodeJob
from openenv.train.failures import FailurePolicy, GroupOutcome, run_group
from openenv.train.metrics import log_rollout_metrics
from openenv.train.mix import HarnessMix
from openenv.train.policy_server import policy_server, trainer_engine
from openenv.train.prompts import parse_prompt
from openenv.train.sequences import SequencePolicy, row_weights
from openenv.train.signal import SignalSampler

__all__ = ["GroupPlan", "HarnessRollout", "RolloutConfig", "training_row"]

_log = logging.getLogger(__name__)

# Chooses the policy of generation `index` (0..num_generations-1) of a group.
PolicyChooser = Callable[[int], EpisodePolicy]


class RolloutConfig(BaseModel):
    """What a training run's episodes look like; everything a user changes without changing code.

    Args:
        harness: a harness name, a mix spec (`"pi=2,claude-code=1"`) or a `HarnessMix`; used for prompts
            that do not name their harness.
        task_set: where prompt task ids are looked up (`builtin`, a Harbor folder, a datasets file).
        engine: which engine samples (`EngineSpec`): `local` (the default) samples the trainer's in-memory
            model; `vllm` the server(s) at its URLs (none: `GRPOConfig.vllm_server_base_url`; several:
            sessions spread over them). Its `model` is the tokenizer/chat-template folder (None: the
            trainer model's `name_or_path`). Resolved once per run (`policy_server.trainer_engine`).
        episode: how each episode runs (`EpisodeSettings`: sandbox, network, sampling, timeouts, budget).
            Its settings may also be given flat: `max_tokens` (the cap on each sampled turn, default 256),
            `temperature` (must equal `GRPOConfig.temperature`: `HarnessRollout` refuses a mismatch), `episode_timeout_s` (the harness's
            wall-clock budget, default: the task's), `network`, `sandbox` (`docker`: each episode in a
            container of its task's image; on Ray every node must have a Docker engine, checked at
            start), `budget` (caps on turns / sampled tokens / context, with each task's own the tightest
            wins; an episode that hits one ends with status `budget`, see `failure.on_budget`).
        max_concurrency: episodes running at once, across the batch's groups.
        failure: the retry/mask policy for failed episodes.
        policy: `sample` (on-policy), `oracle` (reference solutions scored by the policy) or `demo` (the
            solutions' own commands, what a model learns from) for every episode.
        sequences: `all` trains every sequence of an episode (compaction, sub-agents, forks) with the
            episode's advantage; needs `EpisodeGRPOTrainer`, and falls back to `longest` (one sequence per
            episode, the others dropped and counted) with a plain `GRPOTrainer`.
        executor: `thread` (episodes on threads of this process) or `ray` (on `EpisodeWorker` actors of the
            Ray cluster at `ray_address`; needs a `vllm` engine).
        ray_address: the cluster (`auto`, `HOST:PORT`, `ray://...`).
        ray_slots: episode workers to start on Ray (default: every slot the cluster offers).
        tokens: `exact` (the sampled ids, spliced) or `naive`: rows re-rendered from the messages the harness
            sent back, as a text-in/text-out proxy builds them (`openenv.train.naive`). A control for
            measuring what exact tokens are worth, not a way to train.
    """

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    harness: str | HarnessMix = "pi"
    task_set: str = "builtin"
    engine: EngineSpec = EngineSpec("local")
    episode: EpisodeSettings = EpisodeSettings()
    max_concurrency: int = Field(default=4, gt=0)
    failure: FailurePolicy = FailurePolicy()
    policy: EpisodePolicy = "sample"
    sequences: SequencePolicy = "all"
    executor: ExecutorKind = "thread"
    ray_address: str | None = "auto"
    ray_slots: int | None = Field(default=None, gt=0)
    tokens: RowTokens = "exact"

    @model_validator(mode="before")
    @classmethod
    def _flat_settings(cls, data: Any) -> Any:
        return fold_words(data, settings="episode", renames={"episode_timeout_s": "timeout_s"})

    @model_validator(mode="after")
    def _samples(self) -> RolloutConfig:
        sampling = self.episode.sampling
        if sampling is None or not sampling.temperature or not sampling.max_tokens:
            raise ValueError(
                "a training run samples: its episodes need a temperature above 0 and a max_tokens "
                "(keep the temperature equal to GRPOConfig.temperature)"
            )
        if self.episode.sampling_policy != "trainer":
            raise ValueError(
                "a training run samples with the trainer's policy: sampling_policy='request' lets the "
                "harness's top_p, top_k, penalties or schema reshape what the trainer recomputes; "
                "leave it at 'trainer' (evaluation is the place for 'request')"
            )
        return self

    @model_validator(mode="after")
    def _ray_needs_an_engine(self) -> RolloutConfig:
        if self.executor == "ray" and self.engine.backend == "local":
            raise ValueError(
                "executor='ray' needs a vllm engine: the 'local' backend samples the trainer's "
                "in-memory model, which other processes and machines cannot reach"
            )
        return self

    @field_validator("harness")
    @classmethod
    def _valid_mix(cls, harness: str | HarnessMix) -> str | HarnessMix:
        try:
            HarnessMix.of(harness)
        except (ValidationError, BadRequest) as exc:
            raise ValueError(str(exc)) from None
        return harness


@dataclass(frozen=True)
class GroupPlan:
    """One GRPO group: the prompt, its task, the harness it runs in and how many episodes."""

    prompt: str
    task: Task
    harness: str
    size: int


class HarnessRollout:
    """A `rollout_func` for `GRPOTrainer` that answers each prompt with a harness episode.

    Args:
        config: the run's episode settings.
        env_factory: builds a fresh `HarnessEnvironment` per attempt, given the harness name and the
            capture server; default: one on the policy server with `config`'s sampling and network.
        policy_for: the policy of each generation index of a group (default: `config.policy` for all),
            e.g. `lambda i: "oracle" if i == 0 else "sample"` puts one expert episode in every group.
        sampler: draws each group's task itself instead of taking the trainer's draw (`SignalSampler`:
            weighted by the signal its task's kind has had), and sees every finished group's rewards. The
            rows carry the task that ran (`task_id`); TRL's own prompt column keeps its draw.
    """

    def __init__(
        self,
        config: RolloutConfig | None = None,
        *,
        env_factory: EnvBuilder | None = None,
        policy_for: PolicyChooser | None = None,
        sampler: SignalSampler | None = None,
    ) -> None:
        self.config = config or RolloutConfig()
        self.mix = HarnessMix.of(self.config.harness)
        self._custom_env = env_factory
        self._policy_for = policy_for or (lambda _i: self.config.policy)
        self.sampler = sampler
        self._executor: EpisodeExecutor | None = None
        self._pool = CapturePool()  # the run's capture servers: started on first use, stopped by close()
        self._spec: EngineSpec | None = None
        self._tasks: dict[str, Task] | None = None
        self._warned = False
        self.__name__ = "harness_rollout"  # TRL names callables in warnings

    # ---- the TRL contract -------------------------------------------------------------------------------

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, list[Any]]:
        """Run every group of the batch and return TRL's rollout dict (one row per prompt)."""
        plans = self.plan(prompts, trainer)
        futures = [self.start_group(plan, trainer) for plan in plans]
        return self.to_batch(plans, [f.result() for f in futures], trainer)

    def plan(self, prompts: Sequence[Any], trainer: Any) -> list[GroupPlan]:
        """Split the prompts into groups and pick each group's task and harness.

        Raises:
            BadRequest: a group's prompts differ, or the batch is not a whole number of groups.
        """
        size = int(trainer.num_generations if trainer.model.training else trainer.num_generations_eval)
        if len(prompts) % size:
            raise BadRequest(f"{len(prompts)} prompts is not a whole number of groups of {size}")
        self.check_trainer(trainer)
        plans = []
        step = int(trainer.state.global_step)
        for index, start in enumerate(range(0, len(prompts), size)):
            group = prompts[start : start + size]
            if any(p != group[0] for p in group):
                raise BadRequest(
                    f"group {index} mixes prompts {sorted(set(map(str, group)))}; TRL repeats each prompt"
                )
            parsed = parse_prompt(group[0])
            harness = parsed.harness or self.mix.draw(step, index)
            task = self.sampler.choose(step, index) if self.sampler is not None else self._task(parsed.task)
            plans.append(GroupPlan(prompt=group[0], task=task, harness=harness, size=size))
        return plans

    def check_trainer(self, trainer: Any) -> None:
        """Refuse a trainer whose `GRPOConfig.temperature` is not the episodes' sampling temperature: it would
        recompute every logprob as `log_softmax(logits / its temperature)` and compare it with logprobs sampled
        at another (importance ratios, KL and clipping all off by the difference).

        Raises:
            BadRequest: the two temperatures differ; the message names both and the field to change.
        """
        wanted = getattr(getattr(trainer, "args", None), "temperature", None)
        sampling = self.config.episode.sampling
        ours = None if sampling is None else sampling.temperature
        if wanted is not None and ours is not None and float(wanted) != float(ours):
            raise BadRequest(
                f"RolloutConfig samples at temperature {ours:g} but GRPOConfig.temperature is "
                f"{float(wanted):g}: the trainer would recompute every logprob at another "
                f"temperature than the tokens were sampled at; set RolloutConfig(temperature="
                f"{float(wanted):g}) or GRPOConfig(temperature={ours:g})",
                param="temperature",
            )

    def start_group(self, plan: GroupPlan, trainer: Any) -> Future[GroupOutcome]:
        """Start a group's episodes on the executor (with retries); returns the future of its outcome."""
        executor = self.executor(trainer)
        engine = self._engine(trainer)
        builder = self._custom_env  # None: the job builds the default env wherever it runs (picklable)
        jobs = [
            TrainingEpisodeJob(
                harness=plan.harness,
                task=plan.task,
                policy=self._policy_for(i),
                engine=engine,
                settings=self.config.episode,
                sequences=self.sequence_policy(trainer),
                env_builder=builder,
                tokens=self.config.tokens,
            )
            for i in range(plan.size)
        ]
        return run_group(executor, jobs, self.config.failure)

    def executor(self, trainer: Any) -> EpisodeExecutor:
        """Where this rollout's episodes run (started on first use: Ray workers check their nodes then)."""
        if self._executor is None:
            if self.config.executor == "thread":
                self._ensure_server(trainer)
                self._executor = make_executor(
                    "thread",
                    slots=self.config.max_concurrency,
                    engine=self._engine(trainer),
                    harnesses=[],
                    capture=lambda spec: policy_server(trainer, spec, self._pool),
                )
            else:
                self._executor = make_executor(
                    "ray",
                    slots=self.config.ray_slots,
                    engine=self._engine(trainer),
                    harnesses=sorted(self.mix.weights),
                    address=self.config.ray_address,
                    sandbox=self.config.episode.sandbox,
                )
        return self._executor

    def to_batch(
        self, plans: Sequence[GroupPlan], outcomes: Sequence[GroupOutcome], trainer: Any
    ) -> dict[str, list[Any]]:
        """Flatten the groups into TRL's columns and log the rollout's metrics."""
        batch: dict[str, list[Any]] = {}
        filler = _filler_id(trainer)
        loss_type = str(getattr(trainer, "loss_type", "dapo"))
        for plan, outcome in zip(plans, outcomes, strict=True):
            for result, attempts in zip(outcome.results, outcome.attempts, strict=True):
                row = training_row(result, masked=outcome.masked, filler=filler, loss_type=loss_type)
                for key, value in row.items():
                    batch.setdefault(key, []).append(value)
                batch.setdefault("attempts", []).append(attempts)
                batch.setdefault("group_prompt", []).append(plan.prompt)
        if self.sampler is not None:
            for plan, outcome in zip(plans, outcomes, strict=True):
                if not outcome.masked:
                    self.sampler.observe(plan.task.id, [r.reward for r in outcome.results])
        log = getattr(
            trainer, "_log_metric", None
        )  # TRL 1.16's `log_metric` hook (reward functions get it too)
        if log is not None:
            log_rollout_metrics(log, outcomes)
            for kind, weight in (self.sampler.weights() if self.sampler is not None else {}).items():
                log(f"sampler/{kind}/weight", weight)
        return batch

    def sequence_policy(self, trainer: Any) -> SequencePolicy:
        """`all` when the trainer trains branch rows (`EpisodeGRPOTrainer`), else `longest`."""
        if self.config.sequences == "all" and getattr(trainer, "trains_branch_rows", False):
            return "all"
        if self.config.sequences == "all" and not self._warned:
            self._warned = True
            _log.warning(
                "sequences='all' needs openenv.train.EpisodeGRPOTrainer; this %s trains one sequence "
                "per episode (the longest), the others are dropped and counted in "
                "rollout/dropped_sequences",
                type(trainer).__name__,
            )
        return "longest"

    def close(self) -> None:
        """Stop the executor (and its workers) and the capture server this rollout started."""
        if self._executor is not None:
            self._executor.close()
            self._executor = None
        self._pool.close()
        self._pool = CapturePool()  # a closed rollout may run again (a second `train()`): a fresh pool

    # ---- internals --------------------------------------------------------------------------------------

    def _task(self, task_id: str) -> Task:
        if self._tasks is None:
            self._tasks = {t.id: t for t in load_task_set(self.config.task_set)}
        if task_id not in self._tasks:
            raise BadRequest(
                f"task {task_id!r} is not in task set {self.config.task_set!r}; "
                f"it has: {', '.join(sorted(self._tasks))}"
            )
        return self._tasks[task_id]

    def _ensure_server(self, trainer: Any) -> CaptureServer:
        return policy_server(trainer, self._engine(trainer), self._pool)

    def _engine(self, trainer: Any) -> EngineSpec:
        """The run's engine with the trainer's folder and URL filled in, resolved once (a Ray worker
        gets it as is: paths valid on every node)."""
        if self._spec is None:
            self._spec = trainer_engine(trainer, self.config.engine)
        return self._spec


def _filler_id(trainer: Any) -> int:
    """A token for the one-token placeholder rows of failed episodes (it is never trained)."""
    tokenizer = getattr(trainer, "processing_class", None)
    for name in ("eos_token_id", "pad_token_id"):
        value = getattr(tokenizer, name, None)
        if isinstance(value, int):
            return value
    return 0


def _ids(row: Any, masked: bool) -> dict[str, Any]:
    mask = [0] * len(row.env_mask) if masked else list(row.env_mask)
    return {
        "prompt_ids": list(row.prompt_ids),
        "completion_ids": list(row.completion_ids),
        "logprobs": list(row.logprobs),
        "env_mask": mask,
    }


def training_row(
    result: TrainingEpisodeResult, *, masked: bool, filler: int, loss_type: str = "dapo"
) -> dict[str, Any]:
    """One TRL row: the primary sequence (masked: no trained token), the episode's other sequences in
    `branch_rows` (each with its `weight`), the primary's `row_weight`, and the reward components."""
    row = result.row
    weights = row_weights(len(result.rows), loss_type) or [1.0]
    if row is None:
        ids: dict[str, Any] = {
            "prompt_ids": [filler],
            "completion_ids": [filler],
            "logprobs": [0.0],
            "env_mask": [0],
        }
    else:
        ids = _ids(row, masked)
    branches = [{**_ids(b, masked), "weight": w} for b, w in zip(result.branches, weights[1:], strict=True)]
    parts = result.breakdown
    return {
        **ids,
        "harness": result.harness,
        "task_id": result.task_id,
        "policy": result.policy,
        "masked": masked,
        "solved": parts.get("solved", 0.0),
        "tests_passed": parts.get("tests_passed", 0.0),
        "tests_total": parts.get("tests_total", 0.0),
        "tool_calls": float(result.tool_calls),
        "malformed_tool_calls": float(result.malformed_tool_calls),
        "turns": float(result.turns),
        "episode_reward": result.reward,
        "error": result.error or "",
        "node": result.node or "",  # the Ray node that ran the final attempt ("" on the thread executor)
        "row_weight": weights[0],
        "branch_rows": branches,
        "tokens_sampled": float(result.tokens_sampled),
        "tokens_trained": float(result.tokens_trained),
        # What the logprobs mean (capture/logprob_mode.py): sampled at this temperature, the engine's verdict,
        # and whether they equal the trainer's log_softmax(logits / temperature).
        "temperature": row.temperature if row is not None else None,
        "logprob_mode": row.logprob_mode if row is not None else "unknown",
        "logprobs_trainable": bool(row is not None and all(r.trainable for r in result.rows)),
    }
