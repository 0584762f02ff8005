"""Learning, shown on a laptop CPU (issue 21): the stages of `research/learning/learn_cpu.py`.

1. `make_tasks`: the `fileops` task family (`openenv.harness.tasks.fileops`) from a seed, as Harbor
   folders, with a held-out split.
2. `record_oracle`: `openenv eval --policy demo` (the oracle, sending the solution's own commands) through
   the real harness on training tasks, then
   `openenv export --shape tokens`: the demonstrations, token-exact, with `env_mask`.
3. `openenv.train.sft.train_sft`: TRL's `SFTTrainer` on the sampled tokens of those rows only.
4. `train_grpo_run`: GRPO through the real harness (`HarnessRollout`, `EpisodeGRPOTrainer`) from the SFT
   model, with the held-out solve rate measured every few steps.
5. `heldout_solve_rate`: `openenv eval` of a model folder on the held-out split (a subprocess, so the
   numbers are the CLI's own).

The harnesses run unmodified, each made lean through its own flags and config files (`openenv.train.lean`):
one shell tool and a one-line system prompt, ~120-300 tokens per request instead of 2,000-10,000.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from learn_config import LearnConfig, Log, Placement
from learn_episodes import append_commands, call_forms, look_outcomes

from openenv.harness.tasks.fileops import generate, kind_of
from openenv.resources import ENVS_PATH_VAR
from openenv.train.lean import LEAN, LEAN_MINI_FLAGS, LEAN_PI_FLAGS, HarnessName, Lean, lean_envs

__all__ = [
    "LEAN",
    "LEAN_MINI_FLAGS",
    "LEAN_PI_FLAGS",
    "HarnessName",
    "Lean",
    "LearnConfig",
    "Placement",
    "append_commands",
    "call_forms",
    "echo_changes",
    "looked_ids",
    "grpo_ids",
    "heldout_ids",
    "look_outcomes",
    "matrix_ids",
    "heldout_solve_rate",
    "lean_envs",
    "make_tasks",
    "oracle_ids",
    "record_oracle",
    "slipped_ids",
    "teacher_tasks",
    "train_grpo_run",
    "transfer_ids",
    "use_lean_envs",
]


def _env(cfg: LearnConfig) -> dict[str, str]:
    envs = lean_envs(cfg.out)
    return {
        **os.environ,
        ENVS_PATH_VAR: os.pathsep.join([str(envs), os.environ.get(ENVS_PATH_VAR, "")]).rstrip(os.pathsep),
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
    }


def use_lean_envs(cfg: LearnConfig) -> None:
    """Put the lean specs first on `$OPENENV_ENVS_PATH` in this process (GRPO runs episodes here)."""
    os.environ[ENVS_PATH_VAR] = _env(cfg)[ENVS_PATH_VAR]


def make_tasks(cfg: LearnConfig) -> dict[str, list[str]]:
    """The fileops family of `kinds` from `task_seed` (reused when the same split is already there): the
    ids of each split."""
    split = cfg.tasks_dir / "split.json"
    data = json.loads(split.read_text()) if split.is_file() else {}
    if not (
        data.get("seed") == cfg.task_seed
        and len(data.get("train", [])) == cfg.train_tasks
        and len(data.get("heldout", [])) == cfg.heldout_tasks
        and data.get("kinds") == list(cfg.kinds)
    ):
        data = generate(
            cfg.tasks_dir, cfg.task_seed, train=cfg.train_tasks, heldout=cfg.heldout_tasks, kinds=cfg.kinds
        )  # type: ignore[arg-type]
    return {name: list(data[name]) for name in ("train", "heldout")}


def _pick(ids: list[str], count: int, seed: int) -> list[str]:
    chosen = sorted(ids)
    random.Random(seed).shuffle(chosen)
    return sorted(chosen[:count])


def _train_split(cfg: LearnConfig) -> tuple[list[str], list[str]]:
    """The training tasks as (demonstrated by the oracle, not demonstrated), from one read of the split."""
    train = make_tasks(cfg)["train"]
    shown = _pick(train, cfg.oracle_episodes, cfg.task_seed)
    chosen = set(shown)
    return shown, [i for i in train if i not in chosen]


def oracle_ids(cfg: LearnConfig) -> list[str]:
    """The training tasks the oracle demonstrates (the SFT rows)."""
    return _train_split(cfg)[0]


def grpo_ids(cfg: LearnConfig) -> list[str]:
    """The training tasks GRPO samples: those the oracle did not demonstrate, when there are any.

    Why: after many SFT epochs the model has partly memorized its demonstrations, so their rewards say
    little about what it does on an instruction it has not seen, which is what the held-out rate measures.
    """
    shown, rest = _train_split(cfg)
    return rest or shown


def transfer_ids(cfg: LearnConfig) -> list[str]:
    """The few training tasks the second harness's oracle demonstrates (some of those pi's oracle did)."""
    return _pick(oracle_ids(cfg), cfg.transfer_demos, cfg.task_seed + 1)


def matrix_ids(cfg: LearnConfig, harness: str, count: int | None = None) -> list[str]:
    """The demonstrated training tasks whose demonstration the matrix stage records through `harness` (drawn per
    harness, so each harness shows some tasks the others do not): `matrix_demos` of them, or `count`."""
    return _pick(
        oracle_ids(cfg),
        cfg.matrix_demos if count is None else count,
        cfg.task_seed + 10 + sorted(LEAN).index(harness),
    )


def slipped_ids(cfg: LearnConfig) -> list[str]:
    """The demonstrated `append` tasks on which the imperfect teacher overwrites the file: `teacher_slip` of them,
    drawn from the task seed."""
    appends = [i for i in oracle_ids(cfg) if kind_of(i) == "append"]
    return _pick(appends, round((cfg.teacher_slip or 0.0) * len(appends)), cfg.task_seed + 2)


def looked_ids(cfg: LearnConfig) -> list[str]:
    """The demonstrated tasks whose demonstration (in the shaping stage) lists the workspace before acting:
    `shaping_look` of them, drawn from the task seed."""
    shown = oracle_ids(cfg)
    return _pick(shown, round((cfg.shaping_look or 0.0) * len(shown)), cfg.task_seed + 3)


def teacher_tasks(cfg: LearnConfig) -> Path:
    """Copies of the demonstrated training tasks whose `solution/solve.sh` is the imperfect teacher's: on
    `slipped_ids` it writes `echo WORD > NAME` (the file's earlier lines are lost) where the task wants
    `echo WORD >> NAME`. Everything else, the verifier included, is the task's own, so the teacher's episodes
    are scored by the real verifier. Returns the folder holding `train/` (rewritten each call)."""
    import shutil

    root = cfg.teacher_dir / "tasks"
    shutil.rmtree(root, ignore_errors=True)
    slipped = set(slipped_ids(cfg))
    for task in oracle_ids(cfg):
        copy = shutil.copytree(cfg.tasks_dir / "train" / task, root / "train" / task)
        if task in slipped:
            solve = copy / "solution" / "solve.sh"
            right = solve.read_text()
            wrong = right.replace(" >> ", " > ", 1)
            if wrong == right:
                raise ValueError(f"{task}: the oracle's solution has no ' >> ' for the teacher to get wrong")
            solve.write_text(wrong)
    return root


def heldout_ids(cfg: LearnConfig) -> list[str]:
    """The held-out tasks every solve rate of a run is measured on (the same ones for every model)."""
    return _pick(make_tasks(cfg)["heldout"], cfg.eval_tasks, cfg.task_seed)


def _openenv(args: list[str], cfg: LearnConfig, log: Log | None = None) -> str:
    command = [sys.executable, "-m", "openenv.cli.main", *args]
    if log:
        log("$ openenv " + " ".join(a if len(a) < 80 else a[:77] + "..." for a in args))
    done = subprocess.run(command, env=_env(cfg), capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"openenv {args[0]} failed ({done.returncode}): {done.stderr[-2000:]}")
    return done.stdout


def record_oracle(
    cfg: LearnConfig,
    model: Path,
    log: Log | None = None,
    *,
    harness: str = "pi",
    ids: list[str] | None = None,
    tasks: Path | None = None,
    folder: Path | None = None,
    look_first: bool = False,
    look_after: bool = False,
) -> Path:
    """Oracle episodes through `harness` on training tasks (`ids`, default: the `oracle_episodes` of
    `oracle_ids`; from `tasks`, default: the run's, a folder holding `train/`), exported as token rows into
    `folder`; returns the export's `tokens/` (reused when it is there). `model` is the model to be trained: its
    tokenizer and chat template render the prompts, so the rows are the sequences it will see. `look_first`: each
    demonstration lists the workspace before it acts (one more call); `look_after`: right after it acts."""
    folder = folder or cfg.out / ("oracle" if harness == "pi" else f"oracle-{harness}")
    export = folder / "dataset"
    if (export / "tokens").is_dir():
        return export / "tokens"
    ids = ids if ids is not None else oracle_ids(cfg)
    episodes = folder / "eval"
    _openenv(
        [
            "eval",
            "--harness",
            harness,
            "--tasks",
            str((tasks or cfg.tasks_dir) / "train"),
            "--only",
            ",".join(ids),
            "--policy",
            "demo",
            "--model",
            str(model),
            "--concurrency",
            str(cfg.concurrency),
            "--out",
            str(episodes),
            "--json",
            *(["--look-first"] if look_first else []),
            *(["--look-after"] if look_after else []),
        ],
        cfg,
        log,
    )
    _openenv(["export", str(episodes / "episodes"), "--out", str(export), "--shape", "tokens"], cfg, log)
    return export / "tokens"


def echo_changes(
    cfg: LearnConfig, out: Path, log: Log | None = None, *, per_kind: int = 1
) -> dict[str, dict[str, Any]]:
    """What a naive capture's rows change, per harness: oracle episodes (`per_kind` held-out task of each kind)
    through every installed harness (or `cfg.echo_harnesses`), each row re-rendered from the messages the harness sent
    back (`openenv.train.naive`). The oracle's replies (`demo`: the solution's own commands) are the tool calls
    as the chat template writes them, the form the learner samples after SFT; the tiny model scores them (the learner's tokenizer and
    tool-call format, without its cap on prompt length). Per harness: episodes, sampled tokens, sampled
    tokens the naive rows do not hold, their share, and errors; reused from `out/echo.json` when there."""
    from concurrent.futures import ThreadPoolExecutor

    from openenv.capture.canonical import SamplingParams
    from openenv.capture.engine import EngineSpec
    from openenv.harness.catalog import get_spec, harness_names
    from openenv.harness.environment import EpisodeSettings, HarnessEnvironment
    from openenv.harness.install import install_status
    from openenv.harness.tasks.sets import load_task_set
    from openenv.train.episode import run_training_episode

    saved = out / "echo.json"
    if saved.is_file():
        return dict(json.loads(saved.read_text()))
    use_lean_envs(cfg)
    names = cfg.echo_harnesses or [n for n in harness_names() if install_status(get_spec(n)).ready]
    heldout = {t.id: t for t in load_task_set(str(cfg.tasks_dir / "heldout"))}
    tasks = [
        heldout[i]
        for kind in cfg.kinds
        for i in [i for i in heldout_ids(cfg) if kind_of(i) == kind][:per_kind]
    ]
    engine, sampling = EngineSpec(backend="local"), SamplingParams(max_tokens=cfg.max_tokens, temperature=1.0)

    def one(harness: str) -> dict[str, Any]:
        row: dict[str, Any] = {"episodes": 0, "sampled": 0, "changed": 0, "errors": []}
        for task in tasks:
            result = run_training_episode(
                lambda h: HarnessEnvironment(h, engine=engine, settings=EpisodeSettings(sampling=sampling)),
                harness,
                task,
                policy="demo",
                tokens="naive",
            )
            if result.error or result.token_changes is None:
                row["errors"].append(f"{task.id}: {result.error or 'no rows'}")
                continue
            row["episodes"] += 1
            row["sampled"] += result.token_changes[0]
            row["changed"] += result.token_changes[1]
        row["share"] = row["changed"] / row["sampled"] if row["sampled"] else None
        if log:
            log(
                f"  echo {harness}: {row['changed']}/{row['sampled']} sampled tokens changed, {len(row['errors'])} errors"
            )
        return row

    with ThreadPoolExecutor(max_workers=max(1, min(cfg.concurrency, 3))) as pool:
        report = dict(zip(names, pool.map(one, names), strict=True))
    out.mkdir(parents=True, exist_ok=True)
    saved.write_text(json.dumps(report, indent=1))
    return report


def heldout_solve_rate(
    model: Path | None, cfg: LearnConfig, out: Path, log: Log | None = None, *, harness: str = "pi"
) -> dict[str, Any]:
    """`openenv eval` of `model` (None: the tiny random test model) on the held-out tasks through `harness`;
    the CLI's JSON report's row (solved, episodes, solve_rate), `by_kind` (`{kind: [solved, episodes]}`, from its
    episodes' task ids), `calls_per_solved` (mean tool calls of the solved episodes; None when none was),
    `offered_call_share` (the share of tool calls naming a tool the harness offered: `EpisodeLog.offered_calls`;
    None without calls) and the eval's wall time (the first run's, when a finished eval is reused)."""
    from openenv.export.log import read_episodes

    start = time.monotonic()
    ids = heldout_ids(cfg)
    done = out / "results.json"  # the report a finished eval left there (an interrupted run resumes)
    timing = out / "wall_s.json"  # its wall time, so that a resumed run reports what the eval took
    report = json.loads(done.read_text()) if done.is_file() else {}
    if report.get("tasks") != ids:
        args = [
            "eval",
            "--harness",
            harness,
            "--tasks",
            str(cfg.tasks_dir / "heldout"),
            "--only",
            ",".join(ids),
            "--concurrency",
            str(cfg.concurrency),
            "--max-tokens",
            str(cfg.max_tokens),
            "--out",
            str(out),
            "--json",
            "--allow-errors",
        ]  # an errored episode is counted apart in the report, not a failed run
        if model is not None:
            args += ["--model", str(model)]
        report = json.loads(_openenv(args, cfg, log).strip().splitlines()[-1])
        timing.write_text(json.dumps({"wall_s": round(time.monotonic() - start, 1)}))
    wall = (
        json.loads(timing.read_text())["wall_s"] if timing.is_file() else round(time.monotonic() - start, 1)
    )
    row = next(r for r in report["rows"] if r["harness"] == harness)
    by_kind: dict[str, list[int]] = {}  # kind -> [solved, episodes]
    solved_calls = []  # tool calls of each solved episode
    logs = []  # the report's own episodes' logs (the folder may also hold an earlier eval's)
    for episode in report.get("episodes", []):
        summary = episode.get("summary") or {}
        counts = by_kind.setdefault(kind_of(str(summary.get("task", "?"))), [0, 0])
        solved = (summary.get("reward") or 0.0) >= 1.0
        counts[0] += int(solved)
        counts[1] += 1
        if solved:
            solved_calls.append(int(summary.get("tool_calls") or 0))
        if episode.get("trajectory"):
            logs.append(out / "episodes" / Path(episode["trajectory"]).name)  # the folder may have moved
    pairs = [log.offered_calls() for log in read_episodes(logs)[0]]
    offered, calls = sum(p[0] for p in pairs), sum(p[1] for p in pairs)
    return {
        "solved": row["solved"],
        "episodes": row["episodes"],
        "solve_rate": row["solve_rate"],
        "mean_tool_calls": row["mean_tool_calls"],
        "mean_turns": row["mean_turns"],
        "by_kind": dict(sorted(by_kind.items())),
        "wall_s": wall,
        "calls_per_solved": sum(solved_calls) / len(solved_calls) if solved_calls else None,
        "offered_call_share": offered / calls if calls else None,
    }


def train_grpo_run(
    cfg: LearnConfig,
    start: Path,
    out: Path,
    *,
    seed: int,
    log: Log | None = None,
    harness: str = "pi",
    heldout: bool = True,
) -> dict[str, Any]:
    """GRPO through `harness` (a harness name or a mix spec, `"pi,codex"`: `openenv.train.mix`) from `start` (the
    SFT model) for `grpo_steps` steps on the training tasks; with `heldout`, the held-out solve rate through
    `harness` (a single one) is measured every `eval_every` steps and at the end. Returns the curve
    (`[{step, solve_rate, ...}]`), TRL's per-step log and the wall time; the final model is in `out/model`."""
    from transformers import AutoTokenizer, TrainerCallback
    from trl import GRPOConfig

    from openenv.capture.engine import EngineSpec
    from openenv.train.prompts import task_dataset
    from openenv.train.rewards import task_success, tool_call_bonus
    from openenv.train.rollout import HarnessRollout, RolloutConfig
    from openenv.train.trainer import EpisodeGRPOTrainer

    use_lean_envs(cfg)
    out.mkdir(parents=True, exist_ok=True)
    train_ids = grpo_ids(cfg)
    rollout_config = RolloutConfig(
        harness=harness,
        task_set=str(cfg.tasks_dir / "train"),
        engine=EngineSpec("local"),
        max_tokens=cfg.max_tokens,
        temperature=1.0,
        max_concurrency=cfg.concurrency,
        tokens="naive" if cfg.tokens == "naive" else "exact",
    )
    expert = (lambda i: "demo" if i == 0 else "sample") if cfg.expert_in_group else None
    sampler = None
    if cfg.signal_sampler:
        from openenv.harness.tasks.sets import load_task_set
        from openenv.train.signal import SignalSampler, SignalSamplerConfig

        wanted = set(train_ids)
        pool = [t for t in load_task_set(str(cfg.tasks_dir / "train")) if t.id in wanted]
        sampler = SignalSampler(pool, SignalSamplerConfig(key="kind", seed=seed))
    if cfg.tokens == "retokenize":
        from openenv.train.retokenize import RetokenizedRollout

        rollout: HarnessRollout = RetokenizedRollout(rollout_config, policy_for=expert, sampler=sampler)
    else:
        rollout = HarnessRollout(rollout_config, policy_for=expert, sampler=sampler)
    args = GRPOConfig(
        output_dir=str(out / "trainer"),
        use_cpu=True,
        num_generations=cfg.num_generations,
        per_device_train_batch_size=cfg.num_generations * cfg.groups_per_step,
        max_steps=cfg.grpo_steps,
        learning_rate=cfg.grpo_lr,
        lr_scheduler_type="constant_with_warmup",
        warmup_steps=cfg.grpo_warmup_steps,
        adam_beta2=0.99,
        beta=0.0,
        temperature=1.0,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        gradient_checkpointing=False,
        seed=seed,
    )
    curve: list[dict[str, Any]] = []

    class HeldOut(TrainerCallback):  # type: ignore[misc]
        def on_step_end(self, _args: Any, state: Any, _control: Any, **_kw: Any) -> None:
            step = int(state.global_step)
            if step % cfg.eval_every and step != cfg.grpo_steps:
                return
            folder = out / f"step-{step}"
            trainer.save_model(str(folder))
            rate = heldout_solve_rate(folder, cfg, out / f"eval-step-{step}", log, harness=harness)
            curve.append({"step": step, **rate})
            if log:
                log(f"  GRPO step {step}: held-out {rate['solved']}/{rate['episodes']}")

    tokenizer = AutoTokenizer.from_pretrained(start)
    trainer = EpisodeGRPOTrainer(
        model=str(start),
        processing_class=tokenizer,
        args=args,
        train_dataset=task_dataset(train_ids),
        reward_funcs=[task_success, *([tool_call_bonus(*cfg.tool_bonus)] if cfg.tool_bonus else [])],
        rollout_func=rollout,
        callbacks=[HeldOut()] if heldout else [],
    )
    began = time.monotonic()
    try:
        trainer.train()
    finally:
        rollout.close()
    trainer.save_model(str(out / "model"))
    tokenizer.save_pretrained(str(out / "model"))
    history = [h for h in trainer.state.log_history if "reward" in h]
    result = {
        "seed": seed,
        "harness": harness,
        "tokens": cfg.tokens,
        "expert_in_group": cfg.expert_in_group,
        "curve": curve,
        "wall_s": round(time.monotonic() - began, 1),
        "train_reward": [h["reward"] for h in history],
        "retokenized_changed": [
            h["rollout/retokenized_changed"] for h in history if "rollout/retokenized_changed" in h
        ],
        "naive_changed": [h["rollout/naive_changed"] for h in history if "rollout/naive_changed" in h],
        "zero_signal": [h.get("rollout/zero_signal_groups") for h in history],
        "signal_sampler": cfg.signal_sampler,
        "tool_bonus": cfg.tool_bonus,
    }
    (out / "grpo.json").write_text(json.dumps({**result, "log": history}, indent=1))
    return result
