"""Learning, shown on this CPU: a model built here learns the `fileops` tasks through the real pi harness.

    .venv/bin/python examples/learn_cpu.py                      # the full run of docs/learning.md
    .venv/bin/python examples/learn_cpu.py --smoke --out DIR    # a few SFT steps, one GRPO step, one eval

Stages (openenv.train.learn): fileops tasks from a seed with a held-out split -> oracle episodes through
pi (`openenv eval --policy oracle`) -> `openenv export` token rows -> TRL SFTTrainer on the sampled tokens
(env_mask) of a random-init model -> GRPO through pi (HarnessRollout, EpisodeGRPOTrainer) from the SFT
model, one run per seed, plus one run with the token splice off (rows re-tokenized from text) -> held-out
solve rates by `openenv eval` for the random, SFT and GRPO models. Writes results.json under --out and,
unless --no-docs, docs/learning.md and docs/learning.png.
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
from openenv.train.learn import LearnConfig, heldout_solve_rate, make_tasks, record_oracle, train_grpo_run  # noqa: E402
from openenv.train.sft import sft_dataset, train_sft  # noqa: E402

SMOKE = {"train_tasks": 24, "heldout_tasks": 8, "oracle_episodes": 4, "eval_tasks": 2, "sft_rounds": [(1, 6e-3)],
         "grpo_steps": 1, "num_generations": 2, "groups_per_step": 1, "eval_every": 1, "concurrency": 2}


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def run(cfg: LearnConfig, seeds: list[int], *, baseline: bool, expert: bool = True) -> dict[str, Any]:
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
        results["wall_s"] = round(sum(stages), 1)
        saved.write_text(json.dumps(results, indent=1))

    ids = make_tasks(cfg)
    log(f"tasks: {len(ids['train'])} train, {len(ids['heldout'])} held-out ({', '.join(cfg.kinds)}) in {cfg.tasks_dir}")
    tokens = record_oracle(cfg, log)
    data = sft_dataset(tokens, tasks=set(ids["train"]))
    log(f"oracle rows: {len(data)}")
    random_model = cfg.out / "random"
    if not (random_model / "config.json").is_file():
        build_learner(random_model, seed=0)
    start, rounds = random_model, []
    for i, (epochs, lr) in enumerate(cfg.sft_rounds, 1):
        sft = cfg.out / f"sft-round{i}"
        if not (sft / "sft_metrics.json").is_file():
            log(f"SFT round {i}: {len(data)} rows x {epochs} epochs, peak lr {lr} (cosine)")
            train_sft(start, data, sft, epochs=epochs, learning_rate=lr, batch_size=cfg.sft_batch)
        rounds.append(json.loads((sft / "sft_metrics.json").read_text()))
        start = sft
    assert sft == cfg.sft_dir
    results["sft_train"] = {"rows": rounds[0]["rows"], "epochs": sum(r["epochs"] for r in rounds),
                            "wall_s": round(sum(r["wall_s"] for r in rounds), 1), "rounds": rounds,
                            "log": [h for r in rounds for h in r["log"]]}
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
        done = cfg.out / folder / "grpo.json"
        if done.is_file():
            result = json.loads(done.read_text())
        else:
            log(f"GRPO seed {seed}, tokens {run_cfg.tokens}")
            result = train_grpo_run(run_cfg, sft, cfg.out / folder, seed=seed, log=log)
        if run_cfg.expert_in_group:
            results["expert"] = result
        elif run_cfg.tokens == "retokenize":
            results["retokenized"] = result
        else:
            results["grpo"].append(result)
        save()
    return results


def _final(run: dict[str, Any]) -> float:
    return run["curve"][-1]["solve_rate"]


def write_docs(results: dict[str, Any], docs: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cfg = results["config"]
    sft_rate = results["sft"]["solve_rate"]
    finals = [_final(r) for r in results["grpo"]]
    mean = statistics.mean(finals)
    spread = statistics.stdev(finals) if len(finals) > 1 else 0.0
    fig, (ax, tr) = plt.subplots(1, 2, figsize=(11, 4))
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
    for axis in (ax, tr):
        axis.set_ylim(-0.02, 1.02)
        axis.grid(alpha=0.3)
    ax.legend(fontsize=8)
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
        f"{results['wall_s'] / 60:.0f} min on a 2-core machine shared with five other jobs while it ran).",
        "",
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
    verdict = ("above" if mean - sft_rate > spread and mean > sft_rate else "not above")
    all_runs = [*results["grpo"], *([results["retokenized"]] if "retokenized" in results else [])]  # sampled only
    findings = []
    if not any(any(r["train_reward"]) for r in all_runs):
        findings.append("**No GRPO group solved a task**, so every group's rewards were equal, every advantage "
                        "was 0 and no GRPO step changed the weights (TRL logs `frac_reward_zero_std` = 1): GRPO "
                        "learns only from groups with at least one success, which this SFT model does not reach.")
    if results["sft"]["solve_rate"] <= results["random"]["solve_rate"]:
        findings.append(f"**SFT learned the format, not the task.** The random model makes "
                        f"{results['random'].get('mean_tool_calls', 0):.2f} tool calls per episode, the SFT model "
                        f"{results['sft'].get('mean_tool_calls', 0):.2f}: every SFT episode is a well-formed "
                        "`bash` call (`echo WORD >> NAME`) followed by the finish message, but with a word and a "
                        "file name from the vocabulary instead of the ones in the instruction. Copying the slots "
                        f"was not learned from {results['sft_train']['rows']} demonstrations.")
    changed = results.get("retokenized", {}).get("retokenized_changed")
    if changed is not None and not any(changed):
        findings.append("**The no-splice run equals the exact one here**: the SFT model samples the canonical "
                        "tokenization of its replies (it was trained on the canonical ids the proxy recorded), so "
                        "re-tokenizing the text changed no sampled token. A naive proxy's other difference, "
                        "re-rendering tool calls from the JSON the harness echoes back (pi sends "
                        "`{\"command\":...}` where the model sampled `{\"command\": ...}`), is not modelled.")
    lines += [
        "",
        f"GRPO over {len(finals)} seeds: mean {mean:.1%}, standard deviation {spread:.1%}; SFT {sft_rate:.1%}. "
        f"GRPO is **{verdict}** SFT by more than the seed spread.",
        "",
        *[f"- {f}" for f in findings],
        *(["", "What it would take, in order of cost:",
            "- **An expert in every group** (the `GRPO, expert in group` row: "
            "`HarnessRollout(policy_for=lambda i: \"oracle\" if i == 0 else \"sample\")`) gives nonzero "
            "advantages from the first step; it needs many more steps than this run's to move the held-out rate.",
            "- **More demonstrations**: the SFT loss reached ~0.1 on the demonstrations' tokens while the slot "
            "tokens stayed wrong; learning to copy a word needs many more (kind, slot) examples than one "
            "recording per task for a quarter of the training split (on an idle 2-core machine, ~5 s per oracle "
            "episode).",
            "- **More GRPO steps and larger groups** than this shared machine allowed in the time given."]
          if verdict == "not above" else []),
        "",
        "![held-out solve rate per GRPO step, and the training episodes' solve rate per step](learning.png)",
        "",
        "Left: held-out solve rate (measured every `eval_every` steps by `openenv eval`; step 0 is the SFT "
        "model). Right: the solve rate of each GRPO step's own training episodes (sampled, on training tasks).",
        "",
    ]
    (docs / "learning.md").write_text("\n".join(lines) + "\n" + RECIPE)


RECIPE = """
## The recipe

- **Tasks** (`openenv.harness.tasks.fileops`): create a file holding a word, append a line, rename a
  file, fix a named one-character typo; slots from small vocabularies, drawn from a seed, written as
  Harbor task folders with a held-out split of (kind, slot) combinations no training task has. The
  verifier (`tests/check.py`, run as `python3 -I -S` after every agent process is dead) reads the
  workspace as data and wants regular files with exactly the expected lines.
- **Harness**: pi, unmodified, configured with its own flags: `--tools bash --system-prompt "..."`
  (`openenv.train.learn.lean_pi_envs`). Pi's default prompt is ~1,940 tokens with the project's tokenizer;
  the lean one ~370, so each training sequence is ~5x cheaper.
- **Model** (`openenv.models.learner`): a random-init Qwen2 (hidden 64, 2 layers) with the project's
  tokenizer and chat template.
- **SFT**: `openenv eval --policy oracle` through pi -> `openenv export --shape tokens` -> TRL's
  `SFTTrainer` with `completion_mask = [0] * prompt + env_mask`, so only the sampled tokens are targets;
  two rounds (5 epochs at peak lr 6e-3, then 6 at 3e-3, cosine each, batch 2): after the first round the
  model had the shape of a tool call but not its closing braces or the file names (0 held-out solves).
- **GRPO**: `HarnessRollout` + `EpisodeGRPOTrainer` through pi, sampling the trainer's in-memory weights
  (the `local` backend); reward = the verifier's `solved`.
- **Sampling during GRPO** needs `GRPOConfig(gradient_checkpointing=False)` (TRL's default is True): with
  checkpointing on, transformers drops the KV cache, so the in-process sampler decodes each token without
  its context and the episodes are garbage (first GRPO attempt here: 64-token clipped, malformed replies).
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
    parser.add_argument("--no-expert", action="store_true", help="skip the GRPO run with an oracle episode per group")
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
    cfg = LearnConfig(**settings)
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    results = run(cfg, seeds, baseline=not args.no_baseline, expert=not (args.no_expert or args.smoke))
    if not args.no_docs and results["grpo"]:
        write_docs(results, docs)
        log(f"wrote {docs / 'learning.md'} and {docs / 'learning.png'}")
    print(json.dumps({k: results[k] for k in ("random", "sft")} | {
        "grpo": [r["curve"][-1] for r in results["grpo"]]}, indent=1))


if __name__ == "__main__":
    main()
