"""One learning run's settings (`LearnConfig`): the defaults are the run in `research/learning/learning.md`.
Split from `learn.py`, which re-exports it with the stages that read it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from openenv.train.lean import HarnessName

__all__ = ["LearnConfig", "Log", "Placement"]

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
