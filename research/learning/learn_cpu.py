"""Learning, shown on this CPU: a model built here learns the `fileops` tasks through the real pi harness.

    .venv/bin/python research/learning/learn_cpu.py                      # the full run of research/learning/learning.md
    .venv/bin/python research/learning/learn_cpu.py --smoke --out DIR    # a few SFT steps, one GRPO step, one eval

Stages (research/learning/learn.py): fileops tasks from a seed with a held-out split -> oracle episodes through
pi (`openenv eval --policy oracle`) -> `openenv export` token rows -> TRL SFTTrainer on the sampled tokens
(env_mask) of a random-init model -> GRPO through pi (HarnessRollout, EpisodeGRPOTrainer) from the SFT
model, one run per seed, plus one run with the token splice off (rows re-tokenized from text) -> held-out
solve rates by `openenv eval` for the random, SFT and GRPO models. Then an imperfect teacher: the same
recipe on demonstrations that overwrite the file in most `append` tasks, SFT on them as logged, GRPO through
pi from that model (one run per seed), and SFT on the verified ones beside it. Then a second harness (mini-swe-agent):
its oracle demonstrates 4 tasks, the SFT model is tuned on them beside pi's rows, and GRPO runs through it,
one run per seed. Then the seed's findings (issue 32), each stage on its own folder and runnable alone
(`--only-findings`, `--only-shaping`, `--only-matrix`): exact vs naive rows and the signal sampler; tool-call
shaping (demonstrations that list the workspace first, and right after the write, through pi; right after
the write through codex and claude-code too: `shaping_runs`); one harness or
four (GRPO through pi, codex, claude-code and gemini-cli alone and over their mix, and over the mix for
`matrix_long_mix` times the steps, every run evaluated through every harness). Writes results.json under --out and, unless --no-docs,
research/learning/learning.md and research/learning/learning.png (`learn_docs.py`, beside this script) and research/learning/learning-findings.md
(`learn_findings_docs.py`).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any, get_args

from pydantic import ValidationError

os.environ.setdefault("OMP_NUM_THREADS", "2")

from learn import (
    LEAN,
    LearnConfig,
    Placement,
    append_commands,
    grpo_ids,
    heldout_solve_rate,
    make_tasks,
    oracle_ids,
    record_oracle,
)
from learn_docs import write_docs
from learn_findings_docs import write_findings_docs
from learn_stages import (
    grpo_run,
    log,
    run_findings,
    run_matrix,
    run_transfer,
    sft_rounds,
    shaping_key,
    shaping_stage,
    stage_alone,
    teacher_sft,
)

from openenv.models.learner import build_learner
from openenv.train.sft import sft_dataset

SMOKE = {
    "train_tasks": 24,
    "heldout_tasks": 8,
    "oracle_episodes": 4,
    "eval_tasks": 2,
    "sft_rounds": [(1, 1e-2)],
    "grpo_steps": 1,
    "num_generations": 2,
    "groups_per_step": 1,
    "eval_every": 1,
    "concurrency": 2,
    "transfer_demos": 1,
    "transfer_sft_epochs": 1,
    "transfer_grpo_steps": 1,
    "teacher_slip": 1.0,
    "teacher_grpo_steps": 1,
    "findings_grpo_steps": 1,
    "findings_eval_every": 1,
    "shaping_grpo_steps": 1,
    "echo_harnesses": ["pi"],
    "shaping_runs": [["pi", "first"], ["pi", "after"], ["codex", "after"]],
    "matrix_harnesses": ["pi", "codex"],
    "matrix_demos": 1,
    "matrix_grpo_steps": 1,
    "matrix_eval_tasks": 1,
    "matrix_long_mix": 2,
    "shaping_demos": 1,
}


def run(
    cfg: LearnConfig, seeds: list[int], *, baseline: bool, expert: bool = False, findings: bool = True
) -> dict[str, Any]:
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
        stages += [
            teacher.get(k, {}).get("wall_s", 0)
            for k in ("sft_train", "verified_sft_train", "sft", "verified_sft")
        ]
        results["wall_s"] = round(sum(stages), 1)
        saved.write_text(json.dumps(results, indent=1))

    ids = make_tasks(cfg)
    log(
        f"tasks: {len(ids['train'])} train, {len(ids['heldout'])} held-out ({', '.join(cfg.kinds)}) in {cfg.tasks_dir}"
    )
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
        results["teacher"] = run_teacher(
            cfg,
            seeds,
            random_model,
            save_partial=lambda t: (results.update(teacher=t), save()),
            baseline=baseline,
        )
        save()
    if cfg.transfer_harness:
        results["transfer"] = run_transfer(
            cfg, seeds, random_model, tokens, save_partial=lambda t: (results.update(transfer=t), save())
        )
        save()
    if findings:
        results["findings"] = stage_alone(cfg, seeds, cfg.findings_dir, run_findings)
        save()
    if cfg.shaping_look is not None:
        for harness, at in cfg.shaping_runs:
            results[shaping_key(at, harness)] = shaping_stage(cfg, seeds, at, harness)
            save()
    if cfg.matrix_harnesses:
        results["matrix"] = stage_alone(cfg, seeds, cfg.matrix_dir, run_matrix)
        save()
    return results


def run_teacher(
    cfg: LearnConfig, seeds: list[int], random_model: Path, save_partial: Any, *, baseline: bool
) -> dict[str, Any]:
    """The imperfect teacher: its demonstrations are the oracle's, except that on `teacher_slip` of the `append`
    tasks it overwrites the file (`slipped_ids`). SFT on every episode it recorded, as logged (unverified);
    GRPO through pi from that model, one run per seed, reward from the tasks' own verifier. Beside it, SFT on
    the teacher's verified episodes only (what filtering the demonstrations with the same verifier gives), and,
    with `baseline`, one GRPO run with the token splice off (rows re-tokenized from text)."""
    folder = cfg.teacher_dir
    sft, out, tokens = teacher_sft(cfg, random_model)
    verified = sft_dataset(tokens)
    out["verified_rows"] = len(verified)
    # As many optimizer steps as the SFT on every episode: with the same epochs, the fewer rows would mean
    # fewer steps (measured: 14/64 held-out after 756 steps, where the 1,215-step models reach 30-38).
    checked, out["verified_sft_train"] = sft_rounds(
        cfg,
        random_model,
        verified,
        folder / "sft-verified",
        "teacher SFT, verified rows only",
        epochs_scale=out["rows"] / len(verified),
    )
    for name in ("sft_train", "verified_sft_train"):
        out[name].pop("log", None)
    for name, model in (("sft", sft), ("verified_sft", checked)):
        out[name] = heldout_solve_rate(model, cfg, folder / f"eval-{name}", log)
        out[name]["commands"] = append_commands(folder / f"eval-{name}")
        log(
            f"teacher: {name} model held-out {out[name]['solved']}/{out[name]['episodes']} {out[name]['by_kind']}, "
            f"append episodes' commands {out[name]['commands']}"
        )
        save_partial(out)

    def grpo_with_commands(run_cfg: LearnConfig, run_folder: Path, seed: int, title: str) -> dict[str, Any]:
        result = grpo_run(run_cfg, sft, run_folder, seed, title)
        result["commands"] = append_commands(run_folder / f"eval-step-{result['curve'][-1]['step']}")
        return result

    out["grpo"] = []
    for seed in seeds:
        out["grpo"].append(
            grpo_with_commands(
                cfg.teacher_grpo(), folder / f"grpo-seed{seed}", seed, f"teacher: GRPO seed {seed}"
            )
        )
        save_partial(out)
    if baseline:
        out["retokenized"] = grpo_with_commands(
            cfg.teacher_grpo().model_copy(update={"tokens": "retokenize"}),
            folder / "grpo-retokenized",
            seeds[0],
            f"teacher: GRPO seed {seeds[0]}, no splice",
        )
        save_partial(out)
    return out


LOOK_AT: tuple[Placement, ...] = get_args(
    Placement
)  # where a shaping stage's demonstrations list the workspace


def _saved(folder: Path) -> dict[str, Any]:
    """A stage's saved results.json ({} when it has none)."""
    path = folder / "results.json"
    return dict(json.loads(path.read_text())) if path.is_file() else {}


def saved_stages(cfg: LearnConfig, page: Path | None = None) -> dict[str, dict[str, Any]]:
    """Every findings-page stage's saved results under `cfg.out`: `findings`, `matrix` and the shaping stages
    (`shaping_key`: pi's two placements, then each other harness's that ran here or is on the page); a stage with
    none there keeps what the page's own JSON (`page`, research/learning/learning-findings.json) holds, so running one stage on
    a machine that has not run the others does not drop theirs from the page ({} where neither has it)."""
    shown = dict(json.loads(page.read_text())) if page is not None and page.is_file() else {}
    harnesses = [
        "pi",
        *sorted(
            {
                h
                for h in LEAN
                if h != "pi"
                and (any(shaping_key(at, h) in shown for at in LOOK_AT) or h in dict(cfg.shaping_runs))
            }
        ),
    ]
    here = {
        "findings": _saved(cfg.findings_dir),
        **{shaping_key(at, h): _saved(cfg.shaping_dir_for(at, h)) for h in harnesses for at in LOOK_AT},
        "matrix": _saved(cfg.matrix_dir),
    }
    return {k: v or shown.get(k) or {} for k, v in here.items()}


def write_stages(stages: dict[str, dict[str, Any]], docs: Path) -> None:
    """research/learning/learning-findings.md (and its JSON, PNG) from `saved_stages`' or a full run's stages."""
    shaping = {k: v for k, v in stages.items() if k.startswith("shaping")}
    write_findings_docs(stages.get("findings", {}), docs, shaping=shaping, matrix=stages.get("matrix", {}))


def setting(text: str) -> tuple[str, Any]:
    """One `--set FIELD=VALUE`: VALUE parsed as JSON where it is JSON (numbers, lists, null), else kept as text;
    LearnConfig validates it (an unknown field or a bad value is a usage error naming the field)."""
    field, sep, value = text.partition("=")
    if not sep or not field.strip():
        raise argparse.ArgumentTypeError(f"expected FIELD=VALUE, got {text!r}")
    try:
        return field.strip(), json.loads(value)
    except json.JSONDecodeError:
        return field.strip(), value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(".cache/learn"))
    parser.add_argument("--seeds", default="0,1,2", help="GRPO seeds, comma-separated")
    parser.add_argument("--grpo-steps", type=int, default=None)
    parser.add_argument("--oracle-episodes", type=int, default=None)
    parser.add_argument("--eval-tasks", type=int, default=None)
    parser.add_argument("--no-baseline", action="store_true", help="skip the no-splice GRPO run")
    parser.add_argument(
        "--expert", action="store_true", help="add a GRPO run with an oracle episode in each group"
    )
    parser.add_argument("--no-second-harness", action="store_true", help="skip the mini-swe-agent stage")
    parser.add_argument("--no-teacher", action="store_true", help="skip the imperfect-teacher stage")
    parser.add_argument(
        "--no-findings",
        action="store_true",
        help="skip the findings stage (exact vs naive rows, the signal sampler, per-harness echo changes)",
    )
    parser.add_argument(
        "--only-findings",
        action="store_true",
        help="run the findings stage alone (with what it "
        "needs: the tasks and the imperfect teacher's SFT model) and write its page",
    )
    parser.add_argument(
        "--only-shaping",
        action="store_true",
        help="run the tool-call shaping stage alone (its "
        "demonstrations, SFT and GRPO with and without the tool-call bonus) and write the page",
    )
    parser.add_argument("--no-shaping", action="store_true", help="skip the tool-call shaping stage")
    parser.add_argument(
        "--only-matrix",
        action="store_true",
        help="run the one-harness-or-four stage alone (the "
        "teacher's demonstrations through each matrix harness, the tuned start, GRPO in each harness "
        "and in the mix, every run evaluated through every harness) and write the page",
    )
    parser.add_argument("--no-matrix", action="store_true", help="skip the one-harness-or-four stage")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: the CI smoke of the recipe")
    parser.add_argument(
        "--no-docs", action="store_true", help="do not write research/learning/learning.md and the PNG"
    )
    parser.add_argument(
        "--docs-only", action="store_true", help="write the docs from OUT/results.json and stop"
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        type=setting,
        help="any LearnConfig field (research/learning/learn.py), VALUE as JSON or a plain string; e.g. "
        '--set matrix_eval_tasks=16 --set \'matrix_harnesses=["pi","codex"]\'. Repeatable; '
        "the stage's results.json records the config it ran with",
    )
    args = parser.parse_args()
    docs = Path(__file__).resolve().parent  # the pages live beside the scripts
    if args.docs_only:
        if (args.out / "results.json").is_file():
            write_docs(json.loads((args.out / "results.json").read_text()), docs)
        stages = saved_stages(LearnConfig(out=args.out), docs / "learning-findings.json")
        if any(stages.values()):
            write_stages(stages, docs)
        return
    settings: dict[str, Any] = {"out": args.out, **(SMOKE if args.smoke else {})}
    for key in ("grpo_steps", "oracle_episodes", "eval_tasks"):
        if getattr(args, key) is not None:
            settings[key] = getattr(args, key)
    if args.no_second_harness:
        settings["transfer_harness"] = None
    if args.no_teacher:
        settings["teacher_slip"] = None
    if args.no_shaping:
        settings["shaping_look"] = None
    if args.no_matrix:
        settings["matrix_harnesses"] = None
    settings.update(dict(args.set))
    try:
        cfg = LearnConfig(**settings)
    except ValidationError as err:
        parser.error(f"--set: {err}")
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    if args.only_findings or args.only_shaping or args.only_matrix:
        if args.only_findings:
            stage_alone(cfg, seeds, cfg.findings_dir, run_findings)
        for harness, at in cfg.shaping_runs if args.only_shaping else []:
            shaping_stage(cfg, seeds, at, harness)
        if args.only_matrix:
            stage_alone(cfg, seeds, cfg.matrix_dir, run_matrix)
        if not args.no_docs:  # every stage's saved results, so the page keeps the stages not run this time
            write_stages(saved_stages(cfg, docs / "learning-findings.json"), docs)
            log(f"wrote {docs / 'learning-findings.md'}")
        return
    results = run(
        cfg,
        seeds,
        baseline=not args.no_baseline,
        expert=args.expert and not args.smoke,
        findings=not args.no_findings,
    )
    if not args.no_docs and results["grpo"]:
        write_docs(results, docs)
        log(f"wrote {docs / 'learning.md'} and {docs / 'learning.png'}")
    stages = {k: v for k, v in results.items() if k in ("findings", "matrix") or k.startswith("shaping")}
    if not args.no_docs and any(stages.values()):
        write_stages(stages, docs)
        log(f"wrote {docs / 'learning-findings.md'}")
    printed: dict[str, Any] = {
        "random": results["random"],
        "sft": results["sft"],
        "grpo": [r["curve"][-1] for r in results["grpo"]],
    }
    for stage, name in (("transfer", "second_harness"), ("teacher", "teacher")):
        if results.get(stage):
            printed[name] = {
                "sft": results[stage]["sft"],
                "grpo": [r["curve"][-1] for r in results[stage]["grpo"]],
            }
    print(json.dumps(printed, indent=1))


if __name__ == "__main__":
    main()
