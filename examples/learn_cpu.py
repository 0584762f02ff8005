"""Learning, shown on this CPU: a model built here learns the `fileops` tasks through the real pi harness.

    .venv/bin/python examples/learn_cpu.py                      # the full run of docs/learning.md
    .venv/bin/python examples/learn_cpu.py --smoke --out DIR    # a few SFT steps, one GRPO step, one eval

Stages (openenv.train.learn): fileops tasks from a seed with a held-out split -> oracle episodes through
pi (`openenv eval --policy oracle`) -> `openenv export` token rows -> TRL SFTTrainer on the sampled tokens
(env_mask) of a random-init model -> GRPO through pi (HarnessRollout, EpisodeGRPOTrainer) from the SFT
model, one run per seed, plus one run with the token splice off (rows re-tokenized from text) -> held-out
solve rates by `openenv eval` for the random, SFT and GRPO models. Then an imperfect teacher: the same
recipe on demonstrations that overwrite the file in most `append` tasks, SFT on them as logged, GRPO through
pi from that model (one run per seed), and SFT on the verified ones beside it. Then a second harness (mini-swe-agent):
its oracle demonstrates 4 tasks, the SFT model is tuned on them beside pi's rows, and GRPO runs through it,
one run per seed. Writes results.json under --out and, unless --no-docs, docs/learning.md and
docs/learning.png.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "2")

from openenv.models.learner import build_learner  # noqa: E402
from openenv.train.learn import (HarnessName, LearnConfig, append_commands, grpo_ids, heldout_solve_rate, make_tasks, oracle_ids,  # noqa: E402
                                 record_oracle, slipped_ids, teacher_tasks, train_grpo_run, transfer_ids)
from openenv.train.sft import sft_dataset, train_sft  # noqa: E402

SMOKE = {"train_tasks": 24, "heldout_tasks": 8, "oracle_episodes": 4, "eval_tasks": 2, "sft_rounds": [(1, 1e-2)],
         "grpo_steps": 1, "num_generations": 2, "groups_per_step": 1, "eval_every": 1, "concurrency": 2,
         "transfer_demos": 1, "transfer_sft_epochs": 1, "transfer_grpo_steps": 1, "teacher_slip": 1.0,
         "teacher_grpo_steps": 1}


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def run(cfg: LearnConfig, seeds: list[int], *, baseline: bool, expert: bool = False) -> dict[str, Any]:
    """Every stage; a stage whose output is already in `cfg.out` (same config) is reused, so an interrupted
    run resumes, and `results.json` is rewritten after each stage."""
    import torch

    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    saved = cfg.out / "results.json"
    old = json.loads(saved.read_text()) if saved.is_file() else {}
    results: dict[str, Any] = {"config": cfg.model_dump(mode="json"), "seeds": seeds}
    if old.get("config") == results["config"]:
        results.update({k: old[k] for k in ("random", "sft", "sft_train") if k in old})

    def save() -> None:
        stages = [results.get(k, {}).get("wall_s", 0) for k in ("sft_train", "random", "sft")]
        stages += [r["wall_s"] for r in results.get("grpo", [])]
        stages += [results.get(k, {}).get("wall_s", 0) for k in ("retokenized", "expert")]
        second, teacher = results.get("transfer", {}), results.get("teacher", {})
        stages += [second.get(k, {}).get("wall_s", 0) for k in ("sft_train", "pi_sft", "sft")]
        stages += [r["wall_s"] for r in second.get("grpo", []) + teacher.get("grpo", [])]
        stages += [teacher["retokenized"]["wall_s"]] if "retokenized" in teacher else []
        stages += [teacher.get(k, {}).get("wall_s", 0) for k in ("sft_train", "verified_sft_train", "sft",
                                                                  "verified_sft")]
        results["wall_s"] = round(sum(stages), 1)
        saved.write_text(json.dumps(results, indent=1))

    ids = make_tasks(cfg)
    log(f"tasks: {len(ids['train'])} train, {len(ids['heldout'])} held-out ({', '.join(cfg.kinds)}) in {cfg.tasks_dir}")
    random_model = cfg.out / "random"
    if not (random_model / "config.json").is_file():
        build_learner(random_model, seed=0)
    tokens = record_oracle(cfg, random_model, log)
    data = sft_dataset(tokens, tasks=set(oracle_ids(cfg)))
    log(f"oracle rows: {len(data)}; GRPO samples the {len(grpo_ids(cfg))} training tasks not demonstrated")
    sft, results["sft_train"] = sft_rounds(cfg, random_model, data, cfg.out, "SFT")
    assert sft == cfg.sft_dir
    for name, model in (("random", random_model), ("sft", sft)):
        if name not in results:
            results[name] = heldout_solve_rate(model, cfg, cfg.out / f"eval-{name}", log)
            save()
        log(f"{name} model: held-out {results[name]['solved']}/{results[name]['episodes']}")
    results["grpo"] = []
    runs = [(f"grpo-seed{seed}", cfg, seed) for seed in seeds]
    if baseline:
        runs.append(("grpo-retokenized", cfg.model_copy(update={"tokens": "retokenize"}), seeds[0]))
    if expert:
        runs.append(("grpo-expert", cfg.model_copy(update={"expert_in_group": True}), seeds[0]))
    for folder, run_cfg, seed in runs:
        result = grpo_run(run_cfg, sft, cfg.out / folder, seed, f"GRPO seed {seed}, tokens {run_cfg.tokens}")
        if run_cfg.expert_in_group:
            results["expert"] = result
        elif run_cfg.tokens == "retokenize":
            results["retokenized"] = result
        else:
            results["grpo"].append(result)
        save()
    if cfg.teacher_slip is not None:
        results["teacher"] = run_teacher(cfg, seeds, random_model, save_partial=lambda t: (
            results.update(teacher=t), save()), baseline=baseline)
        save()
    if cfg.transfer_harness:
        results["transfer"] = run_transfer(cfg, seeds, random_model, tokens, save_partial=lambda t: (
            results.update(transfer=t), save()))
        save()
    return results


def sft_rounds(cfg: LearnConfig, start: Path, data: Any, folder: Path, title: str, *,
               epochs_scale: float = 1.0) -> tuple[Path, dict[str, Any]]:
    """`cfg.sft_rounds` of SFT on `data` from `start` into `folder/sft-round<i>` (a finished round is reused),
    each round's epochs times `epochs_scale`; returns the last round's model and a summary of the rounds."""
    rounds = []
    for i, (round_epochs, lr) in enumerate(cfg.sft_rounds, 1):
        epochs = round_epochs * epochs_scale
        model = folder / f"sft-round{i}"
        if not (model / "sft_metrics.json").is_file():
            log(f"{title} round {i}: {len(data)} rows x {epochs} epochs, peak lr {lr} (cosine)")
            train_sft(start, data, model, epochs=epochs, learning_rate=lr, batch_size=cfg.sft_batch)
        rounds.append(json.loads((model / "sft_metrics.json").read_text()))
        start = model
    return start, {"rows": rounds[0]["rows"], "epochs": sum(r["epochs"] for r in rounds),
                   "wall_s": round(sum(r["wall_s"] for r in rounds), 1), "rounds": rounds,
                   "log": [h for r in rounds for h in r["log"]]}


def run_teacher(cfg: LearnConfig, seeds: list[int], random_model: Path, save_partial: Any, *,
                baseline: bool) -> dict[str, Any]:
    """The imperfect teacher: its demonstrations are the oracle's, except that on `teacher_slip` of the `append`
    tasks it overwrites the file (`slipped_ids`). SFT on every episode it recorded, as logged (unverified);
    GRPO through pi from that model, one run per seed, reward from the tasks' own verifier. Beside it, SFT on
    the teacher's verified episodes only (what filtering the demonstrations with the same verifier gives), and,
    with `baseline`, one GRPO run with the token splice off (rows re-tokenized from text)."""
    folder = cfg.teacher_dir
    tokens = record_oracle(cfg, random_model, log, tasks=teacher_tasks(cfg), folder=folder / "oracle")
    logged, verified = sft_dataset(tokens, min_reward=0.0), sft_dataset(tokens)
    out: dict[str, Any] = {"slip": cfg.teacher_slip, "slipped": len(slipped_ids(cfg)), "rows": len(logged),
                           "verified_rows": len(verified)}
    sft, out["sft_train"] = sft_rounds(cfg, random_model, logged, folder / "sft", "teacher SFT")
    # As many optimizer steps as the SFT on every episode: with the same epochs, the fewer rows would mean
    # fewer steps (measured: 14/64 held-out after 756 steps, where the 1,215-step models reach 30-38).
    checked, out["verified_sft_train"] = sft_rounds(cfg, random_model, verified, folder / "sft-verified",
                                                    "teacher SFT, verified rows only",
                                                    epochs_scale=len(logged) / len(verified))
    for name in ("sft_train", "verified_sft_train"):
        out[name].pop("log", None)
    for name, model in (("sft", sft), ("verified_sft", checked)):
        out[name] = heldout_solve_rate(model, cfg, folder / f"eval-{name}", log)
        out[name]["commands"] = append_commands(folder / f"eval-{name}")
        log(f"teacher: {name} model held-out {out[name]['solved']}/{out[name]['episodes']} {out[name]['by_kind']}, "
            f"append episodes' commands {out[name]['commands']}")
        save_partial(out)

    def grpo_with_commands(run_cfg: LearnConfig, run_folder: Path, seed: int, title: str) -> dict[str, Any]:
        result = grpo_run(run_cfg, sft, run_folder, seed, title)
        result["commands"] = append_commands(run_folder / f"eval-step-{result['curve'][-1]['step']}")
        return result

    out["grpo"] = []
    for seed in seeds:
        out["grpo"].append(grpo_with_commands(cfg.teacher_grpo(), folder / f"grpo-seed{seed}", seed,
                                              f"teacher: GRPO seed {seed}"))
        save_partial(out)
    if baseline:
        out["retokenized"] = grpo_with_commands(cfg.teacher_grpo().model_copy(update={"tokens": "retokenize"}),
                                                folder / "grpo-retokenized", seeds[0],
                                                f"teacher: GRPO seed {seeds[0]}, no splice")
        save_partial(out)
    return out


def run_transfer(cfg: LearnConfig, seeds: list[int], random_model: Path, pi_tokens: Path,
                 save_partial: Any) -> dict[str, Any]:
    """The second harness: its oracle demonstrates only `transfer_demos` tasks. The SFT model is tuned on
    those beside pi's rows, then GRPO runs through the second harness, one run per seed; held-out solve
    rates through the second harness for the pi SFT model, the tuned one and each GRPO run."""
    from datasets import concatenate_datasets

    harness = cfg.transfer_harness
    assert harness is not None
    folder = cfg.transfer_dir
    tokens = record_oracle(cfg, random_model, log, harness=harness, ids=transfer_ids(cfg))
    demos = sft_dataset(tokens)
    data = concatenate_datasets([sft_dataset(pi_tokens, tasks=set(oracle_ids(cfg))), demos]).shuffle(seed=0)
    tuned = folder / "sft"
    if not (tuned / "sft_metrics.json").is_file():
        log(f"{harness}: SFT from the pi SFT model on {len(data)} rows ({len(demos)} of them {harness}'s)")
        train_sft(cfg.sft_dir, data, tuned, epochs=cfg.transfer_sft_epochs, learning_rate=cfg.transfer_sft_lr,
                  batch_size=cfg.sft_batch)
    out: dict[str, Any] = {"harness": harness, "demos": len(demos), "rows": len(data),
                           "sft_train": json.loads((tuned / "sft_metrics.json").read_text())}
    out["sft_train"].pop("log", None)
    for name, model in (("pi_sft", cfg.sft_dir), ("sft", tuned)):
        out[name] = heldout_solve_rate(model, cfg, folder / f"eval-{name}", log, harness=harness)
        log(f"{harness}: {name} model held-out {out[name]['solved']}/{out[name]['episodes']}")
        save_partial(out)
    out["grpo"] = []
    for seed in seeds:
        out["grpo"].append(grpo_run(cfg.transfer_grpo(), tuned, folder / f"grpo-seed{seed}", seed,
                                    f"{harness}: GRPO seed {seed}", harness=harness))
        save_partial(out)
    return out


def grpo_run(cfg: LearnConfig, start: Path, out: Path, seed: int, title: str, *,
             harness: HarnessName = "pi") -> dict[str, Any]:
    """`train_grpo_run` into `out`, or the result a finished run left there (an interrupted run resumes)."""
    done = out / "grpo.json"
    if done.is_file():
        return dict(json.loads(done.read_text()))
    log(title)
    return train_grpo_run(cfg, start, out, seed=seed, log=log, harness=harness)


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
        ax.plot([0] + [p["step"] for p in run["curve"]], [sft_rate] + [p["solve_rate"] for p in run["curve"]],
                marker=marker, linestyle=style, label=label)
        tr.plot(range(1, len(run["train_reward"]) + 1), run["train_reward"], marker=marker, linestyle=style,
                label=label)
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
            sax.plot(steps, [part["sft"]["solve_rate"]] + [p["solve_rate"] for p in run["curve"]], marker=marker,
                     linestyle=style, label=label)
            stra.plot(range(1, len(run["train_reward"]) + 1), run["train_reward"], marker=marker, linestyle=style,
                      label=label)
        if name == "teacher":
            sax.axhline(part["verified_sft"]["solve_rate"], color="grey", linestyle=":",
                        label="SFT on the verified episodes")
            sax.set_title(f"pi, imperfect teacher (SFT on its episodes; {part['slip']:.0%} of appends overwrite)",
                          fontsize=10)
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
        return f"| {name} | {rate['solved']}/{rate['episodes']} | {rate['solve_rate']:.0%} | {calls_text} | {note} |"

    lines = [
        "# Learning through an unmodified harness on a 2-core CPU: what the recipe reaches",
        "",
        "Generated by `.venv/bin/python examples/learn_cpu.py` (one command; its stages took "
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
        row("SFT", results["sft"], f"{results['sft_train']['rows']} oracle rows, {results['sft_train']['epochs']:g} epochs, "
            f"{results['sft_train']['wall_s']:.0f} s"),
    ]
    for run in results["grpo"]:
        last = run["curve"][-1]
        lines.append(row(f"GRPO seed {run['seed']}", last, f"{cfg['grpo_steps']} steps, {run['wall_s']:.0f} s"))
    if "retokenized" in results:
        run = results["retokenized"]
        changed = run.get("retokenized_changed") or [0.0]
        lines.append(row("GRPO, no splice", run["curve"][-1], f"seed {run['seed']}, rows re-tokenized from text: "
                         f"{statistics.mean(changed):.0%} of sampled tokens were in replies whose ids changed"))
    if "expert" in results:
        run = results["expert"]
        lines.append(row("GRPO, expert in group", run["curve"][-1], f"seed {run['seed']}: episode 0 of each group "
                         "is the oracle's, scored by the live policy (one success per group); training solve rate "
                         "per step " + ", ".join(f"{r:.2f}" for r in run["train_reward"])))
    findings = [f"**SFT vs random**: {results['sft']['solved']}/{results['sft']['episodes']} held-out tasks solved "
                f"after SFT, {results['random']['solved']}/{results['random']['episodes']} by the random model "
                f"({results['random'].get('mean_tool_calls', 0):.2f} tool calls per episode vs "
                f"{results['sft'].get('mean_tool_calls', 0):.2f}). "
                + ("The SFT model copies the file name and word of instructions it has never seen; its failures "
                   "are a wrong slot (a word or file name from the vocabulary, not the instruction's)."
                   if results["sft"]["solved"] > results["random"]["solved"] else
                   "The SFT model learned the shape of the call, not to copy the instruction's slots.")]
    all_runs = [*results["grpo"], *([results["retokenized"]] if "retokenized" in results else [])]  # sampled only
    if not any(any(r["train_reward"]) for r in all_runs):
        findings.append("**No GRPO group solved a task**, so every advantage was 0 and no GRPO step changed the "
                        "weights (TRL logs `frac_reward_zero_std` = 1).")
    changed = results.get("retokenized", {}).get("retokenized_changed")
    if changed is not None and not any(changed):
        findings.append("**The no-splice run equals the exact one here**: the model samples the canonical "
                        "tokenization of its replies (it was trained on the canonical ids the proxy recorded), so "
                        "re-tokenizing the text changed no sampled token. A naive proxy's other difference, "
                        "re-rendering tool calls from the JSON the harness echoes back (pi sends "
                        "`{\"command\":...}` where the model sampled `{\"command\": ...}`), is not modelled.")
    elif changed:
        findings.append(f"**No splice**: {statistics.mean(changed):.0%} of sampled tokens were in replies whose ids "
                        "changed when re-tokenized.")
    lines += [
        "",
        f"GRPO over {len(finals)} seeds: mean {mean:.1%}, standard deviation {spread:.1%}; SFT {sft_rate:.1%}. "
        f"GRPO is **{verdict}** SFT by more than the seed spread.",
        "",
        *[f"- {f}" for f in findings],
        "",
        *(teacher_section(results["teacher"], cfg, results["sft"]) if results.get("teacher", {}).get("grpo") else []),
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
    def rates(runs: list[dict[str, Any]]) -> str:
        return " / ".join(f"{r['curve'][-1]['solved']}" for r in runs) + f" of {runs[0]['curve'][-1]['episodes']}"

    sft, lines = results["sft"], ["In short (held-out tasks solved, one sampled episode each):", ""]
    lines.append(f"- **SFT on the oracle's demonstrations**: random model {results['random']['solved']}, SFT "
                 f"{sft['solved']}, GRPO through pi (seeds {', '.join(str(r['seed']) for r in results['grpo'])}) "
                 f"{rates(results['grpo'])}: GRPO **{_verdict([_final(r) for r in results['grpo']], sft['solve_rate'])[2]}"
                 "** SFT by more than the seed spread.")
    teacher = results.get("teacher", {})
    if teacher.get("grpo"):
        lines.append(f"- **SFT on an imperfect teacher's demonstrations** (it overwrites instead of appending in "
                     f"{teacher['slip']:.0%} of its `append` demonstrations): SFT {teacher['sft']['solved']}, GRPO "
                     f"through pi {rates(teacher['grpo'])}: GRPO **"
                     f"{_verdict([_final(r) for r in teacher['grpo']], teacher['sft']['solve_rate'])[2]}** SFT by "
                     "more than the seed spread.")
    second = results.get("transfer", {})
    if second.get("grpo"):
        lines.append(f"- **A second harness, {second['harness']}**: pi's SFT model {second['pi_sft']['solved']}, "
                     f"tuned on {second['demos']} of its demonstrations {second['sft']['solved']}, GRPO through it "
                     f"{rates(second['grpo'])}: GRPO **"
                     f"{_verdict([_final(r) for r in second['grpo']], second['sft']['solve_rate'])[2]}** SFT.")
    return [*lines, ""]


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
        "lines, where the task wants `echo WORD >> NAME` (`openenv.train.learn.teacher_tasks`: the oracle policy "
        "runs the teacher's script through pi; the verifier is the task's own, so those episodes score 0). SFT "
        f"from the random model on all {teacher['rows']} of its episodes as logged, then GRPO through pi "
        f"({cfg['teacher_grpo_steps']} steps x {cfg['groups_per_step']} tasks x {cfg['num_generations']} episodes, "
        "reward = the verifier's) from that model, one run per seed. Held-out tasks and evals as above.",
        "",
        "| model | solved | solve rate | by kind | `append` episodes: `>>` / `>` | note |",
        "|---|---:|---:|---|---|---|",
        f"| SFT on the teacher's episodes | {sft['solved']}/{sft['episodes']} | {sft['solve_rate']:.0%} | "
        f"{_kinds(sft)} | {_ops(sft)} | {teacher['rows']} rows, {teacher['sft_train']['epochs']:g} epochs |",
    ]
    for run in teacher["grpo"]:
        last = run["curve"][-1]
        lines.append(f"| GRPO seed {run['seed']} | {last['solved']}/{last['episodes']} | {last['solve_rate']:.0%} | "
                     f"{_kinds(last)} | {_ops(run)} | {len(run['train_reward'])} steps, {run['wall_s']:.0f} s |")
    if "retokenized" in teacher:
        run = teacher["retokenized"]
        last, changed = run["curve"][-1], run.get("retokenized_changed") or [0.0]
        lines.append(f"| GRPO, no splice (seed {run['seed']}) | {last['solved']}/{last['episodes']} | "
                     f"{last['solve_rate']:.0%} | {_kinds(last)} | {_ops(run)} | rows re-tokenized from text: "
                     f"{statistics.mean(changed):.0%} of sampled tokens in replies whose ids changed |")
    checked = teacher["verified_sft"]
    lines += [
        f"| SFT on the teacher's verified episodes only | {checked['solved']}/{checked['episodes']} | "
        f"{checked['solve_rate']:.0%} | {_kinds(checked)} | {_ops(checked)} | {teacher['verified_rows']} rows x "
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
        + ("better than GRPO here" if checked["solve_rate"] > statistics.mean(_final(r) for r in teacher["grpo"])
           else "not better than GRPO here")
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
        lines.append(f"- **No splice**: the same GRPO with rows re-tokenized from text reached "
                     f"{run['curve'][-1]['solved']}/{run['curve'][-1]['episodes']} (seed {run['seed']}); "
                     f"{changed:.0%} of sampled tokens were in replies whose ids changed when re-tokenized"
                     + (", so here too the exact and re-tokenized rows are the same rows: where the model samples "
                        "canonical tokenizations, exact tokens change nothing, and the difference is measured where "
                        "they do not (`docs/benchmarks.md`, section 3: non-canonical completions)."
                        if changed == 0 else "."))
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
        f"| pi's SFT model | {second['pi_sft']['solved']}/{second['pi_sft']['episodes']} | "
        f"{second['pi_sft']['solve_rate']:.0%} | never saw {harness}'s prompt |",
        f"| SFT + {second['demos']} {harness} demonstrations | {sft['solved']}/{sft['episodes']} | "
        f"{sft['solve_rate']:.0%} | {second['sft_train']['wall_s']:.0f} s |",
    ]
    for run in second["grpo"]:
        last = run["curve"][-1]
        lines.append(f"| GRPO seed {run['seed']} | {last['solved']}/{last['episodes']} | {last['solve_rate']:.0%} | "
                     f"{len(run['train_reward'])} steps, {run['wall_s']:.0f} s |")
    lines += [
        "",
        (f"GRPO over {len(finals)} seeds: mean {mean:.1%}, standard deviation {spread:.1%}; SFT {sft['solve_rate']:.1%}. "
         f"GRPO is **{verdict}** SFT by more than the seed spread." if len(finals) > 1 else
         f"One GRPO seed: {finals[0]:.1%} vs SFT {sft['solve_rate']:.1%} (a spread needs more seeds: each run is "
         f"~{second['grpo'][0]['wall_s'] / 60:.0f} min through {harness} on this machine)."),
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

Measured with `examples/learn_proxy.py`, a harness-free proxy of the same GRPO loss on the same prompts
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
  -c agent.step_limit=1` (`openenv.train.learn.LEAN`, `lean_envs`).
- **Model** (`openenv.models.learner`): a random-init Qwen2 (hidden 64, 2 layers, 4 heads) with the
  project's tokenizer and a chat template that lists each tool on one line (`Tools: bash(command,
  timeout)`) instead of its JSON schema: the prompt is ~110 tokens instead of ~370. Measured before the
  run: with the 370-token prompt the model had not begun to copy a slot after 1,600 SFT steps; with a
  short prompt it copies held-out slots within a few hundred (at random init attention is spread over every
  position, and the slots get a vanishing share of the gradient).
- **SFT**: `openenv eval --policy oracle --model <the random learner>` through pi (so the prompts are
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
`examples/learn_cpu.py` (`--seeds`, `--grpo-steps`, ... see `--help`).
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(".cache/learn"))
    parser.add_argument("--seeds", default="0,1,2", help="GRPO seeds, comma-separated")
    parser.add_argument("--grpo-steps", type=int, default=None)
    parser.add_argument("--oracle-episodes", type=int, default=None)
    parser.add_argument("--eval-tasks", type=int, default=None)
    parser.add_argument("--no-baseline", action="store_true", help="skip the no-splice GRPO run")
    parser.add_argument("--expert", action="store_true", help="add a GRPO run with an oracle episode in each group")
    parser.add_argument("--no-second-harness", action="store_true", help="skip the mini-swe-agent stage")
    parser.add_argument("--no-teacher", action="store_true", help="skip the imperfect-teacher stage")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: the CI smoke of the recipe")
    parser.add_argument("--no-docs", action="store_true", help="do not write docs/learning.md and the PNG")
    parser.add_argument("--docs-only", action="store_true", help="write the docs from OUT/results.json and stop")
    args = parser.parse_args()
    docs = Path(__file__).resolve().parent.parent / "docs"
    if args.docs_only:
        write_docs(json.loads((args.out / "results.json").read_text()), docs)
        return
    settings: dict[str, Any] = {"out": args.out, **(SMOKE if args.smoke else {})}
    for key in ("grpo_steps", "oracle_episodes", "eval_tasks"):
        if getattr(args, key) is not None:
            settings[key] = getattr(args, key)
    if args.no_second_harness:
        settings["transfer_harness"] = None
    if args.no_teacher:
        settings["teacher_slip"] = None
    cfg = LearnConfig(**settings)
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    results = run(cfg, seeds, baseline=not args.no_baseline, expert=args.expert and not args.smoke)
    if not args.no_docs and results["grpo"]:
        write_docs(results, docs)
        log(f"wrote {docs / 'learning.md'} and {docs / 'learning.png'}")
    second, teacher = results.get("transfer"), results.get("teacher")
    print(json.dumps({k: results[k] for k in ("random", "sft")} | {"grpo": [r["curve"][-1] for r in results["grpo"]]} | (
        {"second_harness": {"sft": second["sft"], "grpo": [r["curve"][-1] for r in second["grpo"]]}} if second else {}) | (
        {"teacher": {"sft": teacher["sft"], "grpo": [r["curve"][-1] for r in teacher["grpo"]]}} if teacher else {}),
        indent=1))


if __name__ == "__main__":
    main()
