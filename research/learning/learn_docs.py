"""The page `research/learning/learn_cpu.py` writes: research/learning/learning.md and research/learning/learning.png from a run's results.json.

    .venv/bin/python research/learning/learn_cpu.py --docs-only     # regenerate both from .cache/learn/results.json

Every number on the page comes from the results; the prose blocks below say what earlier runs measured
with the same code (the GRPO settings tried, the proxy's runs) and how the recipe is built.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

__all__ = ["write_docs"]


def _final(run: dict[str, Any]) -> float:
    return run["curve"][-1]["solve_rate"]


def _verdict(finals: list[float], sft_rate: float) -> tuple[float, float, str]:
    """Mean and standard deviation of the GRPO runs' final rates, and whether the mean is above SFT's by
    more than that spread."""
    mean = statistics.mean(finals)
    spread = statistics.stdev(finals) if len(finals) > 1 else 0.0
    return mean, spread, "above" if mean - sft_rate > spread and mean > sft_rate else "not above"


def write_docs(results: dict[str, Any], docs: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cfg = results["config"]
    sft_rate = results["sft"]["solve_rate"]
    finals = [_final(r) for r in results["grpo"]]
    mean, spread, verdict = _verdict(finals, sft_rate)
    second = results.get("transfer")
    teacher = results.get("teacher") if results.get("teacher", {}).get("grpo") else None
    extra = [(name, part) for name, part in (("teacher", teacher), ("second", second)) if part]
    fig, axes = plt.subplots(1 + len(extra), 2, figsize=(11, 4 * (1 + len(extra))), squeeze=False)
    (ax, tr) = axes[0]
    runs = [(f"GRPO seed {r['seed']}", r, "o", "-") for r in results["grpo"]]
    if "retokenized" in results:
        runs.append(("GRPO, no splice (re-tokenized)", results["retokenized"], "x", "--"))
    if "expert" in results:
        runs.append(("GRPO, oracle episode in each group", results["expert"], "s", ":"))
    for label, run, marker, style in runs:
        ax.plot(
            [0] + [p["step"] for p in run["curve"]],
            [sft_rate] + [p["solve_rate"] for p in run["curve"]],
            marker=marker,
            linestyle=style,
            label=label,
        )
        tr.plot(
            range(1, len(run["train_reward"]) + 1),
            run["train_reward"],
            marker=marker,
            linestyle=style,
            label=label,
        )
    ax.axhline(results["random"]["solve_rate"], color="grey", linestyle=":", label="random model")
    ax.set_xlabel("GRPO step (0 = the SFT model)")
    ax.set_ylabel(f"held-out solve rate ({results['sft']['episodes']} tasks)")
    tr.set_xlabel("GRPO step")
    tr.set_ylabel("solve rate of the step's training episodes")
    ax.set_title("pi", fontsize=10)
    for (name, part), (sax, stra) in zip(extra, axes[1:], strict=True):
        part_runs = [(f"GRPO seed {r['seed']}", r, "o", "-") for r in part["grpo"]]
        if "retokenized" in part:
            part_runs.append(("GRPO, no splice (re-tokenized)", part["retokenized"], "x", "--"))
        for label, run, marker, style in part_runs:
            steps = [0] + [p["step"] for p in run["curve"]]
            sax.plot(
                steps,
                [part["sft"]["solve_rate"]] + [p["solve_rate"] for p in run["curve"]],
                marker=marker,
                linestyle=style,
                label=label,
            )
            stra.plot(
                range(1, len(run["train_reward"]) + 1),
                run["train_reward"],
                marker=marker,
                linestyle=style,
                label=label,
            )
        if name == "teacher":
            sax.axhline(
                part["verified_sft"]["solve_rate"],
                color="grey",
                linestyle=":",
                label="SFT on the verified episodes",
            )
            sax.set_title(
                f"pi, imperfect teacher (SFT on its episodes; {part['slip']:.0%} of appends overwrite)",
                fontsize=10,
            )
        else:
            sax.axhline(part["pi_sft"]["solve_rate"], color="grey", linestyle=":", label="pi's SFT model")
            sax.set_title(f"{part['harness']} (SFT: pi's rows + {part['demos']} of its own)", fontsize=10)
        sax.set_xlabel("GRPO step (0 = the SFT model)")
        sax.set_ylabel(f"held-out solve rate ({part['sft']['episodes']} tasks)")
        stra.set_xlabel("GRPO step")
        stra.set_ylabel("solve rate of the step's training episodes")
    for axis in axes.flat:
        axis.set_ylim(-0.02, 1.02)
        axis.grid(alpha=0.3)
        axis.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(docs / "learning.png", dpi=100)
    plt.close(fig)

    def row(name: str, rate: dict[str, Any], note: str = "") -> str:
        calls = rate.get("mean_tool_calls")
        calls_text = f"{calls:.2f}" if calls is not None else "-"
        return f"| {name} | {_solved(rate)} | {calls_text} | {note} |"

    lines = [
        "# Learning through an unmodified harness on a 2-core CPU: what the recipe reaches",
        "",
        "Generated by `.venv/bin/python research/learning/learn_cpu.py` (one command; its stages took "
        f"{results['wall_s'] / 60:.0f} min on a 2-core machine, not counting the oracle recording).",
        "",
        *summary(results),
        "## Held-out solve rate",
        "",
        f"`openenv eval --harness pi` on the same {results['sft']['episodes']} held-out `fileops` tasks for every "
        "model (sampled at temperature 1, one episode each; no held-out instance is in the training split).",
        "",
        "| model | solved | solve rate | tool calls / episode | note |",
        "|---|---:|---:|---:|---|",
        row("random init", results["random"], "the learner before training"),
        row(
            "SFT",
            results["sft"],
            f"{results['sft_train']['rows']} oracle rows, {results['sft_train']['epochs']:g} epochs, "
            f"{results['sft_train']['wall_s']:.0f} s",
        ),
    ]
    for run in results["grpo"]:
        last = run["curve"][-1]
        lines.append(
            row(f"GRPO seed {run['seed']}", last, f"{cfg['grpo_steps']} steps, {run['wall_s']:.0f} s")
        )
    if "retokenized" in results:
        run = results["retokenized"]
        changed = run.get("retokenized_changed") or [0.0]
        lines.append(
            row(
                "GRPO, no splice",
                run["curve"][-1],
                f"seed {run['seed']}, rows re-tokenized from text: "
                f"{statistics.mean(changed):.0%} of sampled tokens were in replies whose ids changed",
            )
        )
    if "expert" in results:
        run = results["expert"]
        lines.append(
            row(
                "GRPO, expert in group",
                run["curve"][-1],
                f"seed {run['seed']}: episode 0 of each group "
                "is the oracle's, scored by the live policy (one success per group); training solve rate "
                "per step " + ", ".join(f"{r:.2f}" for r in run["train_reward"]),
            )
        )
    findings = [
        f"**SFT vs random**: {results['sft']['solved']}/{results['sft']['episodes']} held-out tasks solved "
        f"after SFT, {results['random']['solved']}/{results['random']['episodes']} by the random model "
        f"({results['random'].get('mean_tool_calls', 0):.2f} tool calls per episode vs "
        f"{results['sft'].get('mean_tool_calls', 0):.2f}). "
        + (
            "The SFT model copies the file name and word of instructions it has never seen; its failures "
            "are a wrong slot (a word or file name from the vocabulary, not the instruction's)."
            if results["sft"]["solved"] > results["random"]["solved"]
            else "The SFT model learned the shape of the call, not to copy the instruction's slots."
        )
    ]
    all_runs = [
        *results["grpo"],
        *([results["retokenized"]] if "retokenized" in results else []),
    ]  # sampled only
    if not any(any(r["train_reward"]) for r in all_runs):
        findings.append(
            "**No GRPO group solved a task**, so every advantage was 0 and no GRPO step changed the "
            "weights (TRL logs `frac_reward_zero_std` = 1)."
        )
    changed = results.get("retokenized", {}).get("retokenized_changed")
    if changed is not None and not any(changed):
        findings.append(
            "**The no-splice run equals the exact one here**: the model samples the canonical "
            "tokenization of its replies (it was trained on the canonical ids the proxy recorded), so "
            "re-tokenizing the text changed no sampled token. A naive proxy's other difference, "
            "re-rendering tool calls from the JSON the harness echoes back (pi sends "
            '`{"command":...}` where the model sampled `{"command": ...}`), is not modelled.'
        )
    elif changed:
        findings.append(
            f"**No splice**: {statistics.mean(changed):.0%} of sampled tokens were in replies whose ids "
            "changed when re-tokenized."
        )
    lines += [
        "",
        f"GRPO over {len(finals)} seeds: mean {mean:.1%}, standard deviation {spread:.1%}; SFT {sft_rate:.1%}. "
        f"GRPO is **{verdict}** SFT by more than the seed spread.",
        "",
        *[f"- {f}" for f in findings],
        "",
        *(
            teacher_section(results["teacher"], cfg, results["sft"])
            if results.get("teacher", {}).get("grpo")
            else []
        ),
        *(transfer_section(second) if second else []),
        GRPO_SWEEP,
        "",
        "![held-out solve rate per GRPO step, and the training episodes' solve rate per step](learning.png)",
        "",
        "Left: held-out solve rate (measured by `openenv eval`; step 0 is the SFT model). Right: the solve rate "
        "of each GRPO step's own training episodes (sampled, on training tasks). Rows: pi; pi from the "
        "imperfect teacher's demonstrations; the second harness.",
        "",
    ]
    (docs / "learning.md").write_text("\n".join(lines) + "\n" + RECIPE)


def summary(results: dict[str, Any]) -> list[str]:
    """The page's opening: each stage's held-out numbers and verdict in one line."""

    def outcome(runs: list[dict[str, Any]], sft: dict[str, Any]) -> str:
        solved = (
            " / ".join(f"{r['curve'][-1]['solved']}" for r in runs)
            + f" of {runs[0]['curve'][-1]['episodes']}"
        )
        return f"{solved}: GRPO **{_verdict([_final(r) for r in runs], sft['solve_rate'])[2]}** SFT"

    sft, lines = results["sft"], ["In short (held-out tasks solved, one sampled episode each):", ""]
    lines.append(
        f"- **SFT on the oracle's demonstrations**: random model {results['random']['solved']}, SFT "
        f"{sft['solved']}, GRPO through pi (seeds {', '.join(str(r['seed']) for r in results['grpo'])}) "
        f"{outcome(results['grpo'], sft)} by more than the seed spread."
    )
    teacher = results.get("teacher", {})
    if teacher.get("grpo"):
        lines.append(
            f"- **SFT on an imperfect teacher's demonstrations** (it overwrites instead of appending in "
            f"{teacher['slip']:.0%} of its `append` demonstrations): SFT {teacher['sft']['solved']}, GRPO "
            f"through pi {outcome(teacher['grpo'], teacher['sft'])} by more than the seed spread."
        )
    second = results.get("transfer", {})
    if second.get("grpo"):
        lines.append(
            f"- **A second harness, {second['harness']}**: pi's SFT model {second['pi_sft']['solved']}, "
            f"tuned on {second['demos']} of its demonstrations {second['sft']['solved']}, GRPO through it "
            f"{outcome(second['grpo'], second['sft'])}."
        )
    lines.append(
        "- **The seed's harness-level findings at this scale** (exact vs naive tokens per harness, groups "
        "without signal and a sampler for them, tool-call shaping, one harness or several: the transfer "
        "matrix): [learning-findings.md](learning-findings.md), from the same command's findings, shaping and "
        "matrix stages."
    )
    return [*lines, ""]


def _solved(rate: dict[str, Any]) -> str:
    """A table's `solved | solve rate` cells."""
    return f"{rate['solved']}/{rate['episodes']} | {rate['solve_rate']:.0%}"


def _ops(found: dict[str, Any]) -> str:
    commands = found.get("commands")
    return f"{commands['append']} / {commands['overwrite']}" if commands else "-"


def _kinds(rate: dict[str, Any]) -> str:
    return ", ".join(f"{kind} {solved}/{n}" for kind, (solved, n) in rate.get("by_kind", {}).items()) or "-"


def teacher_section(teacher: dict[str, Any], cfg: dict[str, Any], clean_sft: dict[str, Any]) -> list[str]:
    """The imperfect teacher's table and verdict, from `results["teacher"]`."""
    sft = teacher["sft"]
    finals = [_final(r) for r in teacher["grpo"]]
    mean, spread, verdict = _verdict(finals, sft["solve_rate"])
    lines = [
        "## An imperfect teacher: GRPO through pi fixes what its demonstrations got wrong",
        "",
        f"The same recipe, but the demonstrations come from a teacher that errs: on {teacher['slipped']} of its "
        f"`append` demonstrations ({teacher['slip']:.0%}) it writes `echo WORD > NAME`, losing the file's earlier "
        "lines, where the task wants `echo WORD >> NAME` (`learn.teacher_tasks`: the oracle policy "
        "runs the teacher's script through pi; the verifier is the task's own, so those episodes score 0). SFT "
        f"from the random model on all {teacher['rows']} of its episodes as logged, then GRPO through pi "
        f"({cfg['teacher_grpo_steps']} steps x {cfg['groups_per_step']} tasks x {cfg['num_generations']} episodes, "
        "reward = the verifier's) from that model, one run per seed. Held-out tasks and evals as above.",
        "",
        "| model | solved | solve rate | by kind | `append` episodes: `>>` / `>` | note |",
        "|---|---:|---:|---|---|---|",
        f"| SFT on the teacher's episodes | {_solved(sft)} | "
        f"{_kinds(sft)} | {_ops(sft)} | {teacher['rows']} rows, {teacher['sft_train']['epochs']:g} epochs |",
    ]
    for run in teacher["grpo"]:
        last = run["curve"][-1]
        lines.append(
            f"| GRPO seed {run['seed']} | {_solved(last)} | {_kinds(last)} | {_ops(run)} | "
            f"{len(run['train_reward'])} steps, {run['wall_s']:.0f} s |"
        )
    if "retokenized" in teacher:
        run = teacher["retokenized"]
        last, changed = run["curve"][-1], run.get("retokenized_changed") or [0.0]
        lines.append(
            f"| GRPO, no splice (seed {run['seed']}) | {_solved(last)} | {_kinds(last)} | {_ops(run)} | "
            "rows re-tokenized from text: "
            f"{statistics.mean(changed):.0%} of sampled tokens in replies whose ids changed |"
        )
    checked = teacher["verified_sft"]
    lines += [
        f"| SFT on the teacher's verified episodes only | {_solved(checked)} | {_kinds(checked)} | {_ops(checked)} | "
        f"{teacher['verified_rows']} rows x "
        f"{teacher['verified_sft_train']['epochs']:.1f} epochs (as many steps): the same verifier, applied to the "
        "demonstrations instead |",
        "",
        f"GRPO over {len(finals)} seeds: mean {mean:.1%}, standard deviation {spread:.1%}; SFT on the teacher's "
        f"episodes {sft['solve_rate']:.1%}. GRPO is **{verdict}** SFT by more than the seed spread.",
        "",
        *teacher_findings(teacher, clean_sft),
        "",
    ]
    return lines


def teacher_findings(teacher: dict[str, Any], clean_sft: dict[str, Any]) -> list[str]:
    """What the imperfect-teacher stage shows, in the numbers of `results["teacher"]`."""
    sft, checked = teacher["sft"], teacher["verified_sft"]
    after = " and ".join(_ops(r) for r in teacher["grpo"])
    lines = [
        "- **Why GRPO moves this and not the clean recipe's rate**: the teacher's error is one decision shared by "
        "every `append` instance (the token ` >>` or ` >` after the word, one token each with this tokenizer), "
        "not a fact about one instance. The SFT model learned the teacher's mixture: the first command of its "
        f"held-out `append` episodes appended / overwrote {_ops(sft)} times. A GRPO group on an `append` task "
        "that samples both contrasts them, and the update on that token carries over to every held-out `append` "
        f"instruction: after GRPO, {after} (seeds in order). The clean recipe's remaining failures are "
        "instance-level (which word, which file name), where an episode carries one bit about one instance.",
        f"- **Filtering the demonstrations with the same verifier** (SFT on the {teacher['verified_rows']} "
        f"episodes that scored 1, as many optimizer steps): {checked['solved']}/{checked['episodes']}, its "
        f"`append` episodes {_ops(checked)}: "
        + (
            "better than GRPO here"
            if checked["solve_rate"] > statistics.mean(_final(r) for r in teacher["grpo"])
            else "not better than GRPO here"
        )
        + ". Where every demonstration can be verified, filtering removes the error before training; GRPO removes "
        "it from the model's own samples, with the verifier only in the environment (demonstrations as logged: "
        "human traces, another model's runs). The SFT models' spread is wide at this size: the same 1,215 steps "
        f"gave {clean_sft['solved']}, {sft['solved']} and {checked['solved']} of {sft['episodes']} held-out on three "
        "demonstration sets (the oracle's, the teacher's, its verified part), so each GRPO run is compared "
        "with the SFT model it started from.",
    ]
    if "retokenized" in teacher:
        run = teacher["retokenized"]
        changed = statistics.mean(run.get("retokenized_changed") or [0.0])
        lines.append(
            f"- **No splice**: the same GRPO with rows re-tokenized from text reached "
            f"{run['curve'][-1]['solved']}/{run['curve'][-1]['episodes']} (seed {run['seed']}); "
            f"{changed:.0%} of sampled tokens were in replies whose ids changed when re-tokenized"
            + (
                ", so here too the exact and re-tokenized rows are the same rows: where the model samples "
                "canonical tokenizations, exact tokens change nothing, and the difference is measured where "
                "they do not (`docs/benchmarks.md`, section 3: non-canonical completions)."
                if changed == 0
                else "."
            )
        )
    return lines


def transfer_section(second: dict[str, Any]) -> list[str]:
    """The second harness's table and verdict, from `results["transfer"]`."""
    harness, sft = second["harness"], second["sft"]
    finals = [_final(r) for r in second["grpo"]]
    mean, spread, verdict = _verdict(finals, sft["solve_rate"])
    lines = [
        f"## A second harness: {harness}, from a few of its own demonstrations",
        "",
        f"pi's oracle demonstrated {second['rows'] - second['demos']} training tasks; {harness}'s demonstrates "
        f"{second['demos']}. The pi SFT model, tuned for {second['sft_train']['epochs']:g} epochs on both sets "
        f"({second['rows']} rows), then GRPO through {harness} (unmodified, with its own `-c` overrides: a one-line "
        f"system template and the instruction alone as the instance template), each held-out solve rate by "
        f"`openenv eval --harness {harness}` on the same {sft['episodes']} held-out tasks.",
        "",
        "| model | solved | solve rate | note |",
        "|---|---:|---:|---|",
        f"| pi's SFT model | {_solved(second['pi_sft'])} | never saw {harness}'s prompt |",
        f"| SFT + {second['demos']} {harness} demonstrations | {_solved(sft)} | {second['sft_train']['wall_s']:.0f} s |",
    ]
    for run in second["grpo"]:
        last = run["curve"][-1]
        lines.append(
            f"| GRPO seed {run['seed']} | {_solved(last)} | {len(run['train_reward'])} steps, "
            f"{run['wall_s']:.0f} s |"
        )
    lines += [
        "",
        (
            f"GRPO over {len(finals)} seeds: mean {mean:.1%}, standard deviation {spread:.1%}; SFT {sft['solve_rate']:.1%}. "
            f"GRPO is **{verdict}** SFT by more than the seed spread."
            if len(finals) > 1
            else f"One GRPO seed: {finals[0]:.1%} vs SFT {sft['solve_rate']:.1%} (a spread needs more seeds: each run is "
            f"~{second['grpo'][0]['wall_s'] / 60:.0f} min through {harness} on this machine)."
        ),
        "",
        SECOND_HARNESS,
        "",
    ]
    return lines


SECOND_HARNESS = """What GRPO has to learn differs between the two harnesses. Through pi, the SFT model's failures
are instance-level (which of 16 words, which of 24 file names), and an episode carries at most one bit about
one instance. Through a harness whose prompt the model has seen in only a handful of demonstrations, part
of the failure is one shared behaviour (answering this prompt as it answers pi's), which every episode of
every task informs. The mini-swe-agent episodes are capped at one step (`agent.step_limit=1`): the task is
one command, and in a first run with a limit of 4 the tuned model's later turns were replies without a tool
call, which mini-swe-agent answers with its format-error template; each became a training row carrying the
episode's advantage (2.75 rows and ~80 sampled tokens per episode instead of 1 and ~36), and after 12 GRPO
steps the held-out rate was the SFT model's (10/64 and 10/64, seed 0).

Measured with `research/learning/learn_proxy.py`, a harness-free proxy of the same GRPO loss on the same prompts
(the first turn only, sampled with `generate`; held-out: 64 tasks x 8 samples, and the mean probability of
the reference reply, which has no sampling noise):

| proxy run (from the SFT model) | held-out reference probability | held-out sampled | training tasks sampled |
|---|---|---|---|
| pi, lr 3e-4, 16 episodes a step, 480 episodes | 0.452 -> 0.457 | 0.438 -> 0.459 | 0.485 -> 0.504 |
| pi, lr 3e-4, 64 episodes a step, 3,840 episodes | 0.452 -> 0.469 | 0.438 -> 0.453 | 0.485 -> 0.546 |
| pi, lr 1e-3, 4 training tasks only, 960 episodes | 0.452 -> 0.400 | 0.438 -> 0.408 | those 4: 0.688 -> 0.938 |
| mini-swe-agent, the recipe's settings (lr 1e-3, 192 episodes), seeds 0 / 1 | 0.182 -> 0.202 / 0.206 | 0.17 -> 0.19 / 0.22 | 0.24 -> 0.30 / 0.33 |

GRPO fits what it samples (4 tasks, to 94%), but what it fits through pi's prompt is those instances, and
held-out falls; 3,840 episodes (an hour of pi on these two cores) move pi's held-out rate by 1.5 points.
Through mini-swe-agent's prompt, 192 episodes move it by 2-5 points in the proxy: a direction that
generalizes, but small next to the 6-point sampling noise of a 64-episode eval, and the real run's
difference from the SFT model (table above) is within that noise."""


GRPO_SWEEP = """## GRPO at this scale: what was tried

Measured while choosing the recipe's GRPO settings, with the same code (`train_grpo_run`), 12 GRPO steps
of 16 pi episodes each (~17 s a step). Beside `openenv eval`'s sampled solve rate, each model was scored
without sampling noise: the mean probability of the reference reply (the oracle's recorded tokens) on the
64 held-out tasks, and how many of them the model's argmax reproduces exactly. SFT models: 480 rows x 20
epochs (sampled 34/64, reference probability 0.566, argmax 43/64); 360 rows x 27 epochs, the recipe's
(28/64, 0.450, 40/64).

| GRPO setting (from the SFT model) | reference probability after 4 / 8 / 12 steps (or as noted) |
|---|---|
| Adam lr 2e-3, 2 groups x 8, on tasks SFT had seen (480-row SFT) | 0.255 at 12; sampled 34 -> 17/64 |
| Adam lr 3e-4, 2 groups x 8 (480-row SFT) | 0.563 at 6, 0.564 at 12; sampled 33, 31/64 |
| Adam lr 1e-3, 4 groups x 4 | 0.341 at 6, 0.354 at 12; sampled 21/64 at 6 |
| SGD lr 0.3 | 0.437 at 3, 0.430, 0.439, 0.443 at 12 |
| SGD lr 1.0 | 0.072 at 3, 0.000 at 12 (collapse) |
| Adam lr 3e-4, 4 PPO iterations per batch (48 updates) | 0.399, 0.394, 0.391 after 3 / 6 / 9 batches |
| Adam lr 1e-3, positive advantages only | 0.394, 0.355 |
| Adam lr 5e-4, 4 warmup steps, beta2 0.99 (the recipe's) | 0.450, 0.459, 0.439 |

- **The tokens are aligned**: before each update, the trainer's log-probabilities of the sampled tokens
  equal the sampler's (mean absolute difference 1.5e-4 and 8e-5 nats over the trained tokens of two steps).
- **The update is mostly noise at 16 episodes a step**: after one Adam step at lr 1e-3, the failed
  episode's log-probability fell by 2.9 nats and its group's three successes' by 0.14, while episodes of
  groups with zero advantage moved by up to 1.3 nats. Small learning rates leave the model where it was;
  larger ones damage it faster than the signal improves it. Half the groups of 4 have equal rewards and
  carry no signal.
- Every setting above left the held-out rate within a few points of the SFT model's or below it. What would
  move it, by what the measurements say: many more episodes per update (hundreds, as GRPO runs on GPUs
  use), which at ~1 s of CPU per pi episode means hours on two cores rather than the minutes here.
"""


RECIPE = """
## The recipe

- **Tasks** (`openenv.harness.tasks.fileops`): create a file holding a word, or append a word as a new
  line to a file; 12 file stems x 2 extensions x 16 words, drawn from a seed and written as Harbor task
  folders, cut into a training split and a held-out split of instructions no training task has (every
  held-out file name and word appears in training, never in that combination and kind). The verifier
  (`tests/check.py`, run as `python3 -I -S` after every agent process is dead) reads the workspace as data
  and wants regular files with exactly the expected lines.
- **Harnesses**: pi and mini-swe-agent, unmodified, each configured with its own flags: pi's `--tools bash
  --system-prompt "..."`, mini-swe-agent's `-c agent.system_template=... -c agent.instance_template={{task}}
  -c agent.step_limit=1` (`learn.LEAN`, `lean_envs`).
- **Model** (`openenv.models.learner`): a random-init Qwen2 (hidden 64, 2 layers, 4 heads) with the
  project's tokenizer and a chat template that lists each tool on one line (`Tools: bash(command,
  timeout)`) instead of its JSON schema: the prompt is ~110 tokens instead of ~370. Measured before the
  run: with the 370-token prompt the model had not begun to copy a slot after 1,600 SFT steps; with a
  short prompt it copies held-out slots within a few hundred (at random init attention is spread over every
  position, and the slots get a vanishing share of the gradient).
- **SFT**: `openenv eval --policy demo --model <the random learner>` (the oracle, sending each solution's own
  command) through pi (so the prompts are
  rendered by the learner's own template) -> `openenv export --shape tokens` -> TRL's `SFTTrainer` with
  `completion_mask = [0] * prompt + env_mask`, so only the sampled tokens are targets.
- **GRPO**: `HarnessRollout` + `EpisodeGRPOTrainer` through pi, sampling the trainer's in-memory weights
  (the `local` backend); reward = the verifier's `solved`. GRPO samples the training tasks the oracle did
  *not* demonstrate: the SFT model has partly memorized its demonstrations, and rewards on them say little
  about an unseen instruction.
- **Sampling during GRPO** needs `GRPOConfig(gradient_checkpointing=False)` (TRL's default is True): with
  checkpointing on, transformers drops the KV cache, so the in-process sampler decodes each token without
  its context and the episodes are garbage.
- **No splice**: the same GRPO with `RetokenizedRollout` (`openenv.train.retokenize`): every row is
  decoded and encoded again, as a text-in/text-out proxy would hand it to the trainer.

Every number above comes from `results.json` in the run folder (`.cache/learn`); rerun with
`research/learning/learn_cpu.py` (`--seeds`, `--grpo-steps`, ... see `--help`).
"""
