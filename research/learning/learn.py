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
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

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

Log = Callable[[str], None]
Placement = Literal["first", "after"]
"""Where a tool-call shaping stage's demonstrations list the workspace: before acting, or right after the write."""


class LearnConfig(BaseModel):
    """One learning run's settings (defaults: the run in `research/learning/learning.md`)."""

    model_config = ConfigDict(extra="forbid")

    out: Path = Path(".cache/learn")
    task_seed: int = 0
    kinds: tuple[str, ...] = Field(
        default=("create", "append"), description="the fileops kinds generated, trained and measured"
    )
    train_tasks: int = 480
    heldout_tasks: int = 64
    oracle_episodes: int = Field(
        default=360,
        ge=1,
        description="training tasks recorded with the oracle (the SFT rows); GRPO samples the others",
    )
    eval_tasks: int = Field(default=64, ge=1, description="held-out tasks per solve-rate measurement")
    sft_rounds: list[tuple[float, float]] = Field(
        default=[(27, 1e-2)],
        description="SFT as (epochs, peak learning rate) rounds, each a cosine schedule from the last",
    )
    sft_batch: int = 8
    grpo_steps: int = 12
    num_generations: int = 4
    groups_per_step: int = 4
    grpo_lr: float = 5e-4
    grpo_warmup_steps: int = Field(
        default=4,
        ge=0,
        description="linear warmup of the GRPO learning rate: a "
        "fresh Adam's first steps move every weight by about the learning rate",
    )
    eval_every: int = 6
    max_tokens: int = Field(default=64, description="cap on each sampled reply (episodes and evals)")
    concurrency: int = 6
    tokens: Literal["exact", "retokenize", "naive"] = Field(
        default="exact",
        description="the rows GRPO trains "
        "on: the sampled ids (`exact`), re-tokenized from "
        "text, or re-rendered from the harness's echo (`naive`)",
    )
    signal_sampler: bool = Field(
        default=False,
        description="draw GRPO's tasks with `SignalSampler` (by the "
        "signal their kind's groups have had) instead of uniformly",
    )
    findings_grpo_steps: int = Field(
        default=12,
        description="GRPO steps of each run of the findings stage "
        "(exact / naive tokens, uniform / signal sampler; held-out every "
        "`findings_eval_every`)",
    )
    findings_eval_every: int = 4
    tool_bonus: tuple[float, int] | None = Field(
        default=None,
        description="GRPO's reward adds "
        "`tool_call_bonus(scale, budget)` to the verifier's (None: the "
        "verifier's alone)",
    )
    shaping_look: float | None = Field(
        default=0.5,
        ge=0,
        le=1,
        description="the tool-call shaping stage: the "
        "share of its demonstrations that list the workspace before acting (an "
        "extra, harmless call); None skips the stage",
    )
    shaping_bonus: tuple[float, int] = Field(
        default=(0.5, 4),
        description="the stage's tool_call_bonus (scale, "
        "budget): a solve in 1 call gets 0.375 more than a fail, in 2 calls 0.25",
    )
    shaping_grpo_steps: int = 12
    shaping_runs: list[tuple[HarnessName, Placement]] = Field(
        default=[("pi", "first"), ("pi", "after"), ("codex", "after"), ("claude-code", "after")],
        description="the tool-call shaping stage's runs as (harness, placement), each into "
        "`shaping_dir_for(placement, harness)`: where the demonstrations' listing goes, `first` (before acting: "
        "measured to cost this learner solves, so run through pi only, for the record) or `after` (right after the "
        "write, where it cannot undo the solve), and the harness GRPO and every held-out eval run through; one other "
        "than pi is taught by pi's shaping demonstrations plus `shaping_demos` of its own",
    )
    shaping_demos: int = Field(
        default=256,
        ge=1,
        description="demonstrations through each shaping harness but pi "
        "(pi's are the pi stage's 360): measured through codex, 64 left a start that never "
        "made the extra call (0 of 64 held-out episodes listed), nothing for the bonus to cut",
    )
    echo_harnesses: list[str] | None = Field(
        default=None,
        description="harnesses whose echo the findings stage measures (None: every installed one)",
    )
    matrix_harnesses: list[HarnessName] | None = Field(
        default=["pi", "codex", "claude-code", "gemini-cli"],
        description="the one-harness-or-four stage: GRPO in each of "
        "these alone and over their even mix, each run evaluated in "
        "every one (None skips the stage): the four dialects",
    )
    matrix_demos: int = Field(
        default=64,
        ge=1,
        description="the imperfect teacher's demonstrations through each "
        "matrix harness but pi (pi's are the teacher stage's); the start is tuned on them",
    )
    matrix_grpo_steps: int = Field(
        default=10,
        description="GRPO steps of each matrix run (every run, single "
        "harness or mix, samples the same number of episodes)",
    )
    matrix_eval_tasks: int = Field(
        default=32,
        ge=1,
        description="held-out tasks per matrix cell (a cell is one model evaluated through one harness)",
    )
    matrix_long_mix: int = Field(
        default=4,
        ge=0,
        description="one more mix run per seed with this many times "
        "`matrix_grpo_steps`, so each harness samples as many episodes in the mix as in "
        "its run alone (at equal total episodes it gets a share); 0 or 1 skips it",
    )
    expert_in_group: bool = Field(
        default=False,
        description="episode 0 of every GRPO group is the oracle's "
        "(the reference solution, scored by the live policy): one success per group",
    )
    transfer_harness: HarnessName | None = Field(
        default="mini-swe-agent",
        description="a second harness "
        "whose oracle demonstrates only `transfer_demos` tasks; the SFT "
        "model is tuned on them beside pi's rows, then GRPO runs through it",
    )
    transfer_demos: int = Field(default=4, ge=1, description="the second harness's oracle demonstrations")
    transfer_sft_epochs: float = Field(
        default=2,
        description="epochs over pi's rows and the second harness's "
        "demonstrations, from the SFT model (cosine from transfer_sft_lr)",
    )
    transfer_sft_lr: float = 3e-3
    transfer_grpo_steps: int = Field(
        default=12,
        description="GRPO steps through the second harness (a step of "
        "16 mini-swe-agent episodes takes ~70 s on 2 cores, 4x pi's)",
    )
    transfer_grpo_lr: float = 1e-3
    teacher_slip: float | None = Field(
        default=0.75,
        ge=0,
        le=1,
        description="the imperfect-teacher stage: the "
        "share of its `append` demonstrations in which the teacher overwrites "
        "(`echo WORD > NAME`) instead of appending; None skips the stage",
    )
    teacher_grpo_steps: int = Field(
        default=24,
        description="GRPO steps from the imperfect teacher's SFT model "
        "(held-out measured every `eval_every`)",
    )

    @property
    def tasks_dir(self) -> Path:
        return self.out / "tasks"

    @property
    def sft_dir(self) -> Path:
        """The SFT model: the last round's output."""
        return self.out / f"sft-round{len(self.sft_rounds)}"

    @property
    def transfer_dir(self) -> Path:
        """The second harness's stages: its SFT model, evals and GRPO runs."""
        return self.out / f"transfer-{self.transfer_harness}"

    @property
    def findings_dir(self) -> Path:
        """The findings stage: the per-harness echo measurement and its GRPO runs."""
        return self.out / "findings"

    @property
    def teacher_dir(self) -> Path:
        """The imperfect-teacher stage: its task copies, recordings, SFT models, evals and GRPO runs."""
        return self.out / "teacher"

    def teacher_grpo(self) -> LearnConfig:
        """This config with the imperfect-teacher stage's GRPO steps."""
        return self.model_copy(update={"grpo_steps": self.teacher_grpo_steps})

    @property
    def shaping_dir(self) -> Path:
        """The tool-call shaping stage that looks first: its demonstrations, SFT model, evals and GRPO runs."""
        return self.shaping_dir_for("first")

    def shaping_dir_for(self, at: Placement, harness: str = "pi") -> Path:
        """The tool-call shaping stage whose demonstrations list the workspace `at` (first, or after acting), run
        through `harness` (pi's keep the folder names they had before there were others)."""
        name = "shaping" if at == "first" else f"shaping-{at}"
        return self.out / (name if harness == "pi" else f"{name}-{harness}")

    @property
    def matrix_dir(self) -> Path:
        """The one-harness-or-four stage: its demonstrations, start model, GRPO runs and their evals."""
        return self.out / "matrix"

    def matrix(self) -> LearnConfig:
        """This config with the matrix stage's GRPO steps and its held-out size."""
        return self.model_copy(
            update={"grpo_steps": self.matrix_grpo_steps, "eval_tasks": self.matrix_eval_tasks}
        )

    def stage_grpo(self, steps: int, **update: Any) -> LearnConfig:
        """This config with a stage's GRPO steps (the findings' or the shaping's), held-out every
        `findings_eval_every`, and `update`."""
        return self.model_copy(update={"grpo_steps": steps, "eval_every": self.findings_eval_every, **update})

    def transfer_grpo(self) -> LearnConfig:
        """This config with the second harness's GRPO settings (held-out measured at the end: a 64-task eval through
        mini-swe-agent takes ~4 minutes on 2 cores)."""
        return self.model_copy(
            update={
                "grpo_steps": self.transfer_grpo_steps,
                "grpo_lr": self.transfer_grpo_lr,
                "eval_every": self.transfer_grpo_steps,
            }
        )


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


def call_forms(eval_folder: Path) -> dict[str, int]:
    """How the tool calls of an `openenv eval` folder's episodes were written, as the model sampled them: their
    arguments with the template's separators (`{"command": "`), compact (`{"command":"`, pi's echo), or other."""
    from openenv.export.log import read_episode

    counts = {"spaced": 0, "compact": 0, "other": 0}
    for path in sorted((eval_folder / "episodes").glob("*.jsonl")):
        for turn in read_episode(path).turns:
            for call in turn.completion.tool_calls if turn.completion else ():
                text = call.arguments
                counts[
                    "spaced"
                    if text.startswith('{"command": "')
                    else "compact"
                    if text.startswith('{"command":"')
                    else "other"
                ] += 1
    return counts


def _episode_commands(eval_folder: Path) -> list[tuple[str, float, list[str]]]:
    """Each episode of an `openenv eval` folder as (task id, reward, the commands it ran, in order), each command
    read where its harness's shell tool puts it (pi's `command`, codex's `cmd`)."""
    from openenv.export.log import read_episode
    from openenv.harness.catalog import get_spec

    report = json.loads((eval_folder / "results.json").read_text())
    rows = []
    for episode in report["episodes"]:
        summary = episode["summary"]
        tool = get_spec(str(summary.get("harness") or "pi")).shell_tool
        log = read_episode(
            eval_folder / "episodes" / Path(episode["trajectory"]).name
        )  # the folder may have moved
        calls = [call for turn in log.turns if turn.completion for call in turn.completion.tool_calls]
        commands = [tool.command_in(call.parsed_arguments()) for call in calls]
        rows.append((str(summary["task"]), float(summary.get("reward") or 0.0), commands))
    return rows


def _first_commands(eval_folder: Path) -> list[tuple[str, float, str]]:
    """Each episode of an `openenv eval` folder as (task id, reward, the first command it ran; "" when none)."""
    return [
        (task, reward, commands[0] if commands else "")
        for task, reward, commands in _episode_commands(eval_folder)
    ]


def append_commands(eval_folder: Path) -> dict[str, int]:
    """How the `append` episodes of an `openenv eval` folder wrote: the first command each episode ran, counted
    as `append` (`>>`), `overwrite` (`>` alone) or `other` (neither, or no tool call). The imperfect teacher's error
    is the second, so this is what GRPO from its SFT model has to change."""
    counts = {"append": 0, "overwrite": 0, "other": 0}
    for task, _, command in _first_commands(eval_folder):
        if kind_of(task) == "append":
            counts[
                "append"
                if ">>" in command
                else "overwrite"
                if re.search(r"(^|[^>])>([^>]|$)", command)
                else "other"
            ] += 1
    return counts


def look_outcomes(eval_folder: Path) -> dict[str, list[int]]:
    """The episodes of an `openenv eval` folder by whether they `looked` (listed the workspace with `ls`, before or
    after acting) or only `acted`, each as [solved, episodes]: whether the extra call the shaping stage's
    demonstrations teach is harmless to this model."""
    counts = {"looked": [0, 0], "acted": [0, 0]}
    for _, reward, commands in _episode_commands(eval_folder):
        row = counts["looked" if any(c.split()[:1] == ["ls"] for c in commands) else "acted"]
        row[0] += int(reward >= 1.0)
        row[1] += 1
    return counts


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
