"""The stages of `learn_cpu.py` that build on one another: SFT rounds and tuning, the imperfect teacher's SFT model,
one GRPO run with its held-out solve rates, and the seed's findings (issue 32), each on its own folder and runnable
alone: exact vs naive rows and the signal sampler (`run_findings`), tool-call shaping (`run_shaping`), one harness or
four (`run_matrix`), and a second harness (`run_transfer`). Split from `learn_cpu.py`, which runs them in order."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from learn import (
    LearnConfig,
    call_forms,
    echo_changes,
    heldout_solve_rate,
    look_outcomes,
    looked_ids,
    make_tasks,
    matrix_ids,
    oracle_ids,
    record_oracle,
    slipped_ids,
    teacher_tasks,
    train_grpo_run,
    transfer_ids,
)

from openenv.models.learner import build_learner
from openenv.train.sft import sft_dataset, train_sft


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def stage_alone(cfg: LearnConfig, seeds: list[int], folder: Path, stage: Any) -> dict[str, Any]:
    """A stage that needs only the tasks and the random model (`run_findings`, `run_shaping`, `run_matrix`: each
    builds its own start), run on its own: its results in `folder/results.json`, rewritten after each of its runs."""
    import torch

    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    make_tasks(cfg)
    random_model = cfg.out / "random"
    if not (random_model / "config.json").is_file():
        build_learner(random_model, seed=0)
    saved = folder / "results.json"
    saved.parent.mkdir(parents=True, exist_ok=True)
    head = {"config": cfg.model_dump(mode="json"), "seeds": seeds}

    def save(part: dict[str, Any]) -> None:
        saved.write_text(json.dumps({**head, **part}, indent=1))

    out = stage(cfg, seeds, random_model, save_partial=save)
    save(out)
    return {**head, **out}


def sft_rounds(
    cfg: LearnConfig, start: Path, data: Any, folder: Path, title: str, *, epochs_scale: float = 1.0
) -> tuple[Path, dict[str, Any]]:
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
    return start, {
        "rows": rounds[0]["rows"],
        "epochs": sum(r["epochs"] for r in rounds),
        "wall_s": round(sum(r["wall_s"] for r in rounds), 1),
        "rounds": rounds,
        "log": [h for r in rounds for h in r["log"]],
    }


def tune(cfg: LearnConfig, base: Path, data: Any, model: Path, title: str) -> dict[str, Any]:
    """A short SFT from a trained model (`base`) on `data` into `model`: `transfer_sft_epochs` epochs, cosine from
    `transfer_sft_lr` (a finished one is reused); its metrics, without the per-step log."""
    if not (model / "sft_metrics.json").is_file():
        log(title)
        train_sft(
            base,
            data,
            model,
            epochs=cfg.transfer_sft_epochs,
            learning_rate=cfg.transfer_sft_lr,
            batch_size=cfg.sft_batch,
        )
    metrics = dict(json.loads((model / "sft_metrics.json").read_text()))
    metrics.pop("log", None)
    return metrics


def teacher_sft(cfg: LearnConfig, random_model: Path) -> tuple[Path, dict[str, Any], Path]:
    """The imperfect teacher's demonstrations through pi and SFT on all of them as logged (each reused when
    there): the SFT model, the stage's record (`slip`, `slipped`, `rows`, `sft_train`) and the token rows."""
    tokens = record_oracle(
        cfg, random_model, log, tasks=teacher_tasks(cfg), folder=cfg.teacher_dir / "oracle"
    )
    logged = sft_dataset(tokens, min_reward=0.0)
    out: dict[str, Any] = {"slip": cfg.teacher_slip, "slipped": len(slipped_ids(cfg)), "rows": len(logged)}
    sft, out["sft_train"] = sft_rounds(cfg, random_model, logged, cfg.teacher_dir / "sft", "teacher SFT")
    return sft, out, tokens


def run_findings(cfg: LearnConfig, seeds: list[int], random_model: Path, save_partial: Any) -> dict[str, Any]:
    """The seed's findings at this scale (issue 32), from the imperfect teacher's SFT model, where GRPO through
    pi has signal: what a naive capture's rows change per harness (`echo`, oracle episodes through every
    installed harness), and GRPO through pi with exact rows, with naive rows (re-rendered from pi's echo)
    and with the signal sampler, one run each per seed, `findings_grpo_steps` steps."""
    folder = cfg.findings_dir
    start, _, _ = teacher_sft(cfg, random_model)
    out: dict[str, Any] = {
        "steps": cfg.findings_grpo_steps,
        "groups_per_step": cfg.groups_per_step,
        "num_generations": cfg.num_generations,
    }
    out["start"] = heldout_solve_rate(start, cfg, cfg.teacher_dir / "eval-sft", log)
    out["echo"] = echo_changes(cfg, folder / "echo", log)
    save_partial(out)
    variants: dict[str, dict[str, Any]] = {
        "exact": {},
        "naive": {"tokens": "naive"},
        "signal": {"signal_sampler": True},
    }
    return variant_runs(
        cfg,
        cfg.findings_grpo_steps,
        variants,
        start,
        folder,
        seeds,
        out,
        save_partial,
        "findings",
        after=lambda result, run_folder: result.update(
            call_forms=call_forms(run_folder / f"eval-step-{result['curve'][-1]['step']}")
        ),
    )


def shaping_key(at: str, harness: str = "pi") -> str:
    """The results key of the shaping stage whose demonstrations look `at` through `harness` (pi's keep the keys
    they had before there were others: `shaping`, `shaping_after`; codex's `shaping_codex`, `shaping_after_codex`)."""
    key = "shaping" if at == "first" else f"shaping_{at}"
    return key if harness == "pi" else f"{key}_{harness}"


def shaping_stage(cfg: LearnConfig, seeds: list[int], at: str, harness: str = "pi") -> dict[str, Any]:
    """The tool-call shaping stage with its listing `at` ("first" or "after") through `harness`, on its own folder."""
    one = cfg.model_copy(update={"shaping_runs": [(harness, at)]})
    return stage_alone(one, seeds, one.shaping_dir_for(at, harness), run_shaping)  # type: ignore[arg-type]


def run_shaping(cfg: LearnConfig, seeds: list[int], random_model: Path, save_partial: Any) -> dict[str, Any]:
    """Tool-call shaping (issue 32), the run `shaping_runs[0]` (harness, placement): demonstrations of which
    `shaping_look` list the workspace, before acting or right after (an extra call that should neither help nor
    hurt; before, measured, it costs this learner solves); the imperfect teacher's SFT model tuned on them (why not
    SFT from the random model: measured, that reached 4/64 held-out, too few solved episodes to count calls on; the
    teacher's model already copies the instruction's slots), then GRPO through the run's harness from that model
    with the verifier's reward alone and with
    `tool_call_bonus(*shaping_bonus)` added, one run each per seed; held-out solve rate and tool calls per solved
    episode through that harness. A harness other than pi is taught by pi's demonstrations (the pi stage's
    recordings, reused) plus `shaping_demos` of its own, looking as often: the teacher's model writes only pi's
    tool call; 64 of a harness's own demonstrations were what the matrix stage needed for it to write that
    harness's, but through codex that start never made the extra call, so there was nothing to cut."""
    from datasets import concatenate_datasets

    assert cfg.shaping_look is not None
    harness, at = cfg.shaping_runs[0]
    folder = cfg.shaping_dir_for(at, harness)
    looked = set(looked_ids(cfg))
    own = {harness: matrix_ids(cfg, harness, cfg.shaping_demos)} if harness != "pi" else {}
    shown = {"pi": oracle_ids(cfg), **own}
    parts, rows, looks = [], {}, {}
    for through, ids in shown.items():
        recorded = cfg.shaping_dir_for(at, through)
        for name, group, look in (
            ("look", [i for i in ids if i in looked], True),
            ("plain", [i for i in ids if i not in looked], False),
        ):
            if group:
                parts.append(
                    sft_dataset(
                        record_oracle(
                            cfg,
                            random_model,
                            log,
                            harness=through,
                            ids=group,
                            folder=recorded / f"oracle-{name}",
                            look_first=look and at == "first",
                            look_after=look and at == "after",
                        )
                    )
                )
                rows[through] = rows.get(through, 0) + len(parts[-1])
                looks[through] = looks.get(through, 0) + (len(group) if look else 0)
    data = concatenate_datasets(parts).shuffle(seed=0)
    teacher, _, _ = teacher_sft(cfg, random_model)
    start = folder / "tuned"
    sft_train = tune(
        cfg,
        teacher,
        data,
        start,
        f"shaping ({harness}): SFT from the teacher's model on {len(data)} "
        f"rows ({sum(looks.values())} look {at}; by harness {rows})",
    )
    out: dict[str, Any] = {
        "look": cfg.shaping_look,
        "look_at": at,
        "harness": harness,
        "looked": sum(looks.values()),
        "rows": len(data),
        "rows_by_harness": rows,
        "looked_by_harness": looks,
        "sft_train": sft_train,
        "tool_bonus": list(cfg.shaping_bonus),
        "steps": cfg.shaping_grpo_steps,
    }
    out["sft"] = heldout_solve_rate(start, cfg, folder / "eval-tuned", log, harness=harness)
    out["sft"]["looks"] = look_outcomes(folder / "eval-tuned")
    save_partial(out)
    variants: dict[str, dict[str, Any]] = {"plain": {}, "bonus": {"tool_bonus": tuple(cfg.shaping_bonus)}}

    def looks(result: dict[str, Any], run_folder: Path) -> None:
        for point in result["curve"]:
            point["looks"] = look_outcomes(run_folder / f"eval-step-{point['step']}")

    return variant_runs(
        cfg,
        cfg.shaping_grpo_steps,
        variants,
        start,
        folder,
        seeds,
        out,
        save_partial,
        f"shaping ({at}, {harness})",
        after=looks,
        harness=harness,
    )


def variant_runs(
    cfg: LearnConfig,
    steps: int,
    variants: dict[str, dict[str, Any]],
    start: Path,
    folder: Path,
    seeds: list[int],
    out: dict[str, Any],
    save_partial: Any,
    stage: str,
    after: Any = None,
    harness: str = "pi",
) -> dict[str, Any]:
    """One GRPO run of `steps` from `start` through `harness` per (seed, variant), each variant a config update,
    into `folder/<variant>-seed<seed>`; seed by seed, so that a stage cut short has every variant at the same seeds.
    Each result (after `after(result, run_folder)`, when given) goes to `out[variant]`, saved after each run."""
    for variant in variants:
        out[variant] = []
    for seed in seeds:
        for variant, update in variants.items():
            run_folder = folder / f"{variant}-seed{seed}"
            result = grpo_run(
                cfg.stage_grpo(steps, **update),
                start,
                run_folder,
                seed,
                f"{stage}: GRPO {variant}, seed {seed}",
                harness=harness,
            )
            if after is not None:
                after(result, run_folder)
            out[variant].append(result)
            save_partial(out)
    return out


def run_matrix(cfg: LearnConfig, seeds: list[int], random_model: Path, save_partial: Any) -> dict[str, Any]:
    """One harness or four (issue 32): the imperfect teacher's SFT model (pi) tuned on the teacher's rows beside
    `matrix_demos` of its demonstrations through each other matrix harness is the start; from it, GRPO through
    each harness alone and through their even mix (`openenv.train.mix`; every run samples the same episodes),
    one run per seed; the start and every run evaluated through every harness on `matrix_eval_tasks` held-out
    tasks. Every piece (recording, SFT, run, cell) is reused when its folder holds it."""
    from datasets import concatenate_datasets

    harnesses = list(cfg.matrix_harnesses or [])
    folder, mcfg = cfg.matrix_dir, cfg.matrix()
    teacher, _, pi_tokens = teacher_sft(cfg, random_model)
    parts, demos = [sft_dataset(pi_tokens, min_reward=0.0)], {}
    for harness in harnesses:
        if harness != "pi":
            rows = sft_dataset(
                record_oracle(
                    cfg,
                    random_model,
                    log,
                    harness=harness,
                    ids=matrix_ids(cfg, harness),
                    tasks=teacher_tasks(cfg),
                    folder=folder / f"oracle-{harness}",
                ),
                min_reward=0.0,
            )
            demos[harness] = len(rows)
            parts.append(rows)
    data = concatenate_datasets(parts).shuffle(seed=0)
    start = folder / "sft"
    sft_train = tune(
        cfg,
        teacher,
        data,
        start,
        f"matrix: SFT from the teacher's model on {len(data)} rows ({demos} from the other harnesses)",
    )
    out: dict[str, Any] = {
        "harnesses": harnesses,
        "demos": demos,
        "rows": len(data),
        "sft_train": sft_train,
        "steps": mcfg.grpo_steps,
        "groups_per_step": mcfg.groups_per_step,
        "num_generations": mcfg.num_generations,
        "eval_tasks": mcfg.eval_tasks,
    }

    def cells(model: Path, where: Path) -> dict[str, Any]:
        row = {}
        for harness in harnesses:
            row[harness] = heldout_solve_rate(model, mcfg, where / f"eval-{harness}", log, harness=harness)
            log(
                f"matrix: {where.name} through {harness}: {row[harness]['solved']}/{row[harness]['episodes']}"
            )
        return row

    out["start"] = cells(start, folder / "start")
    # The start evaluated once per seed: each cell is one sampled episode per task, and the verdicts compare the
    # runs with the start's own spread across evals, not with one draw.
    out["start_repeats"] = [cells(start, folder / f"start-{i}") for i in range(1, len(seeds))]
    save_partial(out)
    trained_in = {h: h for h in harnesses} | ({"mix": ",".join(harnesses)} if len(harnesses) > 1 else {})
    out["runs"] = {name: [] for name in trained_in}

    def train(name: str, harness: str, run_cfg: LearnConfig, seed: int, where: str) -> None:
        """One matrix run through `harness` (a name or a mix), kept as `out["runs"][name]` and in its folder."""
        run_folder = folder / f"{name.replace('_', '-')}-seed{seed}"
        result = grpo_run(
            run_cfg,
            start,
            run_folder,
            seed,
            f"matrix: GRPO in {where}, seed {seed}",
            harness=harness,
            heldout=False,
        )
        result["eval"] = cells(run_folder / "model", run_folder)
        out["runs"][name].append(result)
        save_partial(out)

    for seed in seeds:
        for name, harness in trained_in.items():
            train(name, harness, mcfg, seed, name)
    if cfg.matrix_long_mix > 1 and "mix" in trained_in:
        # At equal total episodes each harness gets a share of the mix's; the seed's claim is about the mix itself,
        # so this run gives each harness as many episodes as its run alone (after the others: they stay comparable).
        long = mcfg.model_copy(update={"grpo_steps": mcfg.grpo_steps * cfg.matrix_long_mix})
        out["long_mix_steps"], out["runs"]["mix_long"] = long.grpo_steps, []
        for seed in seeds:
            train("mix_long", trained_in["mix"], long, seed, f"the mix for {long.grpo_steps} steps")
    return out


def run_transfer(
    cfg: LearnConfig, seeds: list[int], random_model: Path, pi_tokens: Path, save_partial: Any
) -> dict[str, Any]:
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
    out: dict[str, Any] = {
        "harness": harness,
        "demos": len(demos),
        "rows": len(data),
        "sft_train": tune(
            cfg,
            cfg.sft_dir,
            data,
            tuned,
            f"{harness}: SFT from the pi SFT model on {len(data)} rows ({len(demos)} of them {harness}'s)",
        ),
    }
    for name, model in (("pi_sft", cfg.sft_dir), ("sft", tuned)):
        out[name] = heldout_solve_rate(model, cfg, folder / f"eval-{name}", log, harness=harness)
        log(f"{harness}: {name} model held-out {out[name]['solved']}/{out[name]['episodes']}")
        save_partial(out)
    out["grpo"] = []
    for seed in seeds:
        out["grpo"].append(
            grpo_run(
                cfg.transfer_grpo(),
                tuned,
                folder / f"grpo-seed{seed}",
                seed,
                f"{harness}: GRPO seed {seed}",
                harness=harness,
            )
        )
        save_partial(out)
    return out


def grpo_run(
    cfg: LearnConfig,
    start: Path,
    out: Path,
    seed: int,
    title: str,
    *,
    harness: str = "pi",
    heldout: bool = True,
) -> dict[str, Any]:
    """`train_grpo_run` into `out`, or the result a finished run left there (an interrupted run resumes): the
    same dict either way (grpo.json also holds TRL's per-step log, which the result leaves out)."""
    done = out / "grpo.json"
    if done.is_file():
        result = dict(json.loads(done.read_text()))
        result.pop("log", None)
        return result
    log(title)
    return train_grpo_run(cfg, start, out, seed=seed, log=log, harness=harness, heldout=heldout)
