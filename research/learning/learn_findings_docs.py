"""The page of the findings stage of `research/learning/learn_cpu.py`: research/learning/learning-findings.md and its PNG, from
`OUT/findings/results.json` (`--docs-only` regenerates both; the results are also copied beside the page as
research/learning/learning-findings.json, so the page can be rebuilt without the run's folder).

Every number comes from the results; a verdict line follows each comparison: a difference counts when the
means differ by more than the larger of the two seed spreads (standard deviations), else it is undecided.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from learn_matrix_docs import matrix_lines
from learn_verdicts import compare, finding, mean_sd

__all__ = ["compare", "write_findings_docs"]


def _rate_at(run: dict[str, Any], step: int) -> float | None:
    return next((p["solve_rate"] for p in run["curve"] if p["step"] == step), None)


def _curve_table(runs: dict[str, list[dict[str, Any]]], start: float) -> list[str]:
    steps = sorted({p["step"] for rs in runs.values() for r in rs for p in r["curve"]})
    lines = [
        "| run | " + " | ".join(f"step {s}" for s in [0, *steps]) + " |",
        "|---|" + "---:|" * (len(steps) + 1),
    ]
    for name, rs in runs.items():
        for r in rs:
            cells = [f"{start:.0%}"] + [
                f"{v:.0%}" if (v := _rate_at(r, s)) is not None else "" for s in steps
            ]
            lines.append(f"| {name}, seed {r['seed']} | " + " | ".join(cells) + " |")
        means = []
        for s in steps:
            vals = [v for r in rs if (v := _rate_at(r, s)) is not None]
            means.append(f"**{mean_sd(vals)[0]:.1%} ± {mean_sd(vals)[1]:.1%}**" if vals else "")
        lines.append(f"| {name}, mean ± sd | {start:.0%} | " + " | ".join(means) + " |")
    return lines


def _zero_signal(run: dict[str, Any]) -> list[float]:
    return [float(v) for v in run.get("zero_signal", []) if v is not None]


def _steps_to(run: dict[str, Any], rate: float) -> int | None:
    return next((p["step"] for p in run["curve"] if p["solve_rate"] >= rate), None)


def write_findings_docs(
    results: dict[str, Any],
    docs: Path,
    *,
    shaping: dict[str, dict[str, Any]] | None = None,
    matrix: dict[str, Any] | None = None,
) -> None:
    """The page from the findings stage's results, the shaping stages' (`shaping`: by results key, `shaping` and
    `shaping_after` for pi's two placements, `shaping_after_codex` and so on for other harnesses; each gets a
    section, 3, 3b, 3c, ... in the mapping's order) and the matrix stage's (any may be empty: not run; a matrix
    cut short shows the runs it finished)."""
    lines = ["# The seed's findings at laptop scale", ""]
    shaping = {"shaping": {}, "shaping_after": {}, **(shaping or {})}
    if results:
        lines += _findings_lines(results)
    ran_shaping = [stage for stage in shaping.values() if stage.get("plain")]
    for number, stage in zip(["3", *(f"3{chr(ord('b') + i)}" for i in range(25))], ran_shaping):
        lines += _shaping_lines(stage, number)
    ran = bool(matrix and any(matrix.get("runs", {}).values()))
    if ran:
        lines += matrix_lines(matrix or {})
    missing = (
        []
        if ran
        else [
            "- **One harness or four (the transfer matrix)** (`--only-matrix`): not in this run; "
            "its verdicts are **undecided** here."
        ]
    )
    if not ran_shaping:
        missing.append(
            "- **Tool-call shaping** (`--only-shaping`): not in this run; its verdict is **undecided** here."
        )
    elif not shaping["shaping_after"].get("plain"):
        missing.append(
            "- **Tool-call shaping with the listing after the write** (`--only-shaping --set "
            '\'shaping_runs=[["pi","after"]]\'`): not in this run.'
        )
    if ran_shaping and all(stage.get("harness", "pi") == "pi" for stage in ran_shaping):
        missing.append(
            "- **Tool-call shaping through a harness other than pi** (`--only-shaping --set "
            '\'shaping_runs=[["codex","after"]]\'`): not in this run.'
        )
    if missing:
        lines += ["## Not measured in this run", "", *missing]
    lines.append("")
    (docs / "learning-findings.md").write_text("\n".join(lines))
    (docs / "learning-findings.json").write_text(
        json.dumps({"findings": results, **shaping, "matrix": matrix or {}}, indent=1)
    )
    if results:
        _plot(results, docs / "learning-findings.png")


def _findings_lines(results: dict[str, Any]) -> list[str]:
    cfg = results["config"]
    start = results["start"]["solve_rate"]
    exact, naive, signal = results.get("exact", []), results.get("naive", []), results.get("signal", [])
    final = {
        name: [r["curve"][-1]["solve_rate"] for r in rs]
        for name, rs in (("exact", exact), ("naive", naive), ("signal", signal))
        if rs
    }
    wall = sum(r["wall_s"] for rs in (exact, naive, signal) for r in rs)
    lines = [
        f"Generated by `.venv/bin/python research/learning/learn_cpu.py --only-findings` (part of the full run; its GRPO "
        f"runs took {wall / 60:.0f} min on a 2-core machine) from `research/learning/learning-findings.json`. Every run starts "
        f"from the imperfect teacher's SFT model of [learning.md](learning.md) (held-out "
        f"{results['start']['solved']}/{results['start']['episodes']} in this stage's own evaluation: episodes are "
        "sampled, so it differs by a few tasks from learning.md's), where GRPO through pi has signal; each is "
        f"{results['steps']} GRPO steps of {results['groups_per_step']} groups x {results['num_generations']} pi "
        f"episodes, learning rate {cfg['grpo_lr']}, held-out `openenv eval` on the same "
        f"{results['start']['episodes']} tasks every {cfg['findings_eval_every']} steps, seeds "
        f"{', '.join(map(str, results['seeds']))}. A difference counts when the means differ by more than the "
        "larger seed spread (standard deviation); otherwise it is undecided at this scale.",
        "",
        "## 1. What exact tokens are worth",
        "",
        "A text-in/text-out proxy builds a row from the last request's messages, which hold the harness's "
        "*echo* of each earlier reply, not the sampled tokens (`openenv.train.naive`): the tool call parsed and "
        "serialized again by the harness (or, for dialects that send arguments as an object, by the proxy's "
        "`json.dumps`), rendered through the chat template, trained by prefix length. Oracle episodes through "
        "each installed harness, one held-out task of each kind, rows re-rendered that way:",
        "",
        "| harness | episodes | sampled tokens | not in the naive row | share | errors |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for name, row in sorted(results.get("echo", {}).items()):
        share = f"{row['share']:.1%}" if row.get("share") is not None else "-"
        errors = "; ".join(e[:80] for e in row["errors"]) or ""
        lines.append(
            f"| {name} | {row['episodes']} | {row['sampled']} | {row['changed']} | {share} | {errors} |"
        )
    changed_harnesses = sorted(n for n, r in results.get("echo", {}).items() if r.get("changed"))
    lines += [
        "",
        f"Harnesses whose echo changes sampled tokens: {', '.join(changed_harnesses) or 'none'}. The "
        "others send back what the model sampled, or an object the proxy serializes the way the template "
        "does.",
        "",
    ]
    if exact and naive:
        naive_share = [v for r in naive for v in r.get("naive_changed", [])]
        lines += [
            "GRPO through pi from the same start, exact rows vs naive rows (pi's echo re-rendered), "
            f"held-out solve rate; in the naive runs {statistics.mean(naive_share):.1%} of the sampled "
            "tokens were not in the rows trained (mean over steps)."
            if naive_share
            else "",
            "",
        ]
        lines += _curve_table({"exact": exact, "naive": naive}, start)
        forms = {
            name: [sum(r.get("call_forms", {}).get(k, 0) for r in rs) for k in ("spaced", "compact")]
            for name, rs in (("exact", exact), ("naive", naive))
        }
        lines += [
            "",
            f"After the last step the held-out tool calls were written {forms['naive'][0]} spaced / "
            f"{forms['naive'][1]} compact in the naive runs ({forms['exact'][0]} / {forms['exact'][1]} in the "
            "exact ones): training on pi's compact echo did not move the model to it. Why, in GRPO: the "
            "echo changes the same tokens in every episode of a group, and a group's advantages sum to zero, "
            "so a change shared by the whole group gets almost no net push (the contexts before it differ only "
            "in the task's words); SFT on echoed rows (all weights "
            "positive) would train it. What a naive capture costs GRPO is a change that differs between "
            "the episodes of a group (the re-tokenization of free text, `docs/benchmarks.md` section 3), "
            "not a constant re-serialization.",
        ]
        verdict = compare(final["exact"], final["naive"])
        lines += [
            "",
            f"**Finding (exact tokens train better than a naive capture's)**: final held-out exact "
            f"{mean_sd(final['exact'])[0]:.1%} ± {mean_sd(final['exact'])[1]:.1%}, naive "
            f"{mean_sd(final['naive'])[0]:.1%} ± {mean_sd(final['naive'])[1]:.1%}: exact is {verdict} "
            f"naive, so the finding is **{finding(verdict)}** at this scale.",
            "",
        ]
    if exact and signal:
        sampler_zero = [v for r in signal for v in _zero_signal(r)]
        lines += [
            "## 2. Groups without signal",
            "",
            "The share of each step's groups whose rewards were all equal (`rollout/zero_signal_groups`), "
            "TRL's uniform draw of tasks vs the signal sampler (`openenv.train.signal.SignalSampler`: each "
            "task weighs its kind's recent signal rate, Laplace over the kind's last 8 groups, floor 0.1; "
            "kinds here are `create` and `append`):",
            "",
        ]
        steps = max(len(_zero_signal(r)) for r in exact + signal)
        lines += [
            "| sampler | " + " | ".join(f"step {i + 1}" for i in range(steps)) + " | mean |",
            "|---|" + "---:|" * (steps + 1),
        ]
        for name, rs in (("uniform", exact), ("signal", signal)):
            cells = []
            for i in range(steps):
                vals = [z[i] for r in rs if len(z := _zero_signal(r)) > i]
                cells.append(f"{statistics.mean(vals):.2f}" if vals else "")
            flat = [v for r in rs for v in _zero_signal(r)]
            lines.append(
                f"| {name} (mean of {len(rs)} seeds) | "
                + " | ".join(cells)
                + f" | **{statistics.mean(flat):.2f}** |"
            )
        lines += ["", "Held-out solve rate, same runs:", ""]
        lines += _curve_table({"uniform": exact, "signal sampler": signal}, start)
        target = mean_sd(final["exact"])[0]
        reach = [_steps_to(r, target) for r in signal]
        steps = sorted({p["step"] for r in exact + signal for p in r["curve"]})
        at_step = []
        for step in steps:
            a = [v for r in signal if (v := _rate_at(r, step)) is not None]
            b = [v for r in exact if (v := _rate_at(r, step)) is not None]
            if a and b:
                at_step.append(f"step {step}: {compare(a, b)} ({mean_sd(a)[0]:.1%} vs {mean_sd(b)[0]:.1%})")
        lines += [
            "",
            f"Steps for each signal-sampler seed to reach the uniform runs' final mean ({target:.1%}): "
            + ", ".join(str(s) if s is not None else f"not within {results['steps']}" for s in reach)
            + f" (the uniform runs took {results['steps']}, by construction of the target). The sampler's "
            "held-out mean against the uniform draw's, step by step: " + "; ".join(at_step) + ".",
            "",
        ]
        per_run = [statistics.mean(_zero_signal(r)) for r in exact if _zero_signal(r)]
        mean, spread = mean_sd(per_run)
        zero_verdict = (
            "reproduced" if mean - 0.5 > spread else "refuted" if 0.5 - mean > spread else "undecided"
        )
        lines += [
            f"**Finding (most groups carry no signal; the reference's pilot: 80%)**: with the uniform draw "
            f"{mean:.0%} ± {spread:.0%} of each run's groups were flat (mean ± sd over seeds), so the finding "
            f"is **{zero_verdict}** at this scale (reproduced: more than half, by more than the spread).",
            "",
            f"**The sampler**: {statistics.mean(sampler_zero):.0%} of its groups were flat; its final held-out "
            f"rate is {compare(final['signal'], final['exact'])} the uniform draw's "
            f"({mean_sd(final['signal'])[0]:.1%} ± {mean_sd(final['signal'])[1]:.1%} vs "
            f"{mean_sd(final['exact'])[0]:.1%} ± {mean_sd(final['exact'])[1]:.1%}) after {results['steps']} steps.",
            "",
        ]
    return lines


def _calls(run: dict[str, Any]) -> float | None:
    return run["curve"][-1].get("calls_per_solved")


def _shown(calls: float | None) -> str:
    return "-" if calls is None else f"{calls:.2f}"


def _looks(point: dict[str, Any], how: str) -> str:
    """`solved/episodes` of an eval's episodes that looked first (or acted first); `-` when not measured."""
    row = point.get("looks", {}).get(how)
    return "-" if row is None else f"{row[0]}/{row[1]}"


def _shaping_lines(shaping: dict[str, Any], number: str = "3") -> list[str]:
    plain, bonus = shaping["plain"], shaping.get("bonus", [])
    sft = shaping["sft"]
    scale, budget = shaping["tool_bonus"]
    first = shaping.get("look_at", "first") == "first"
    harness = shaping.get("harness", "pi")  # results from before there were other harnesses are pi's
    where = (
        "before acting"
        if first
        else "right after acting (the write has happened: the listing cannot undo it)"
    )
    title = (
        f"## {number}. Tool-call shaping"
        + ("" if harness == "pi" else f" through {harness}")
        + ("" if first else ", the listing after the write")
    )
    by_harness = shaping.get("rows_by_harness", {})
    shown = (
        f"Demonstrations through pi, {shaping['looked']} of {shaping['rows']} of which"
        if harness == "pi"
        else f"Demonstrations through pi ({by_harness.get('pi')} rows) and through {harness} ({by_harness.get(harness)}, "
        f"the learner's only lesson in {harness}'s tool call), {shaping['looked']} of all {shaping['rows']} of which"
    )
    lines = [
        title,
        "",
        f"{shown} list the workspace (`ls -la`) {where}, an extra call meant to neither help nor hurt "
        f"(`--policy demo --look-{'first' if first else 'after'}`); the imperfect teacher's SFT model tuned on all "
        f"of them (held-out through {harness} {sft['solved']}/{sft['episodes']}, {_shown(sft['calls_per_solved'])} "
        f"tool calls per solved episode); then {shaping['steps']} GRPO steps through {harness} from that model "
        f"with the verifier's reward alone, and with `tool_call_bonus(scale={scale}, budget={budget})` added "
        f"(a solve in one call earns {scale * (1 - 1 / budget):.3f} more, in two "
        f"{scale * (1 - 2 / budget):.3f}).",
        "",
        f"| run | held-out solved | tool calls per solved episode | {'looked first' if first else 'listed'}: "
        f"solved / episodes | {'acted first' if first else 'did not list'}: solved / episodes |",
        "|---|---:|---:|---:|---:|",
        f"| the start (tuned) | {sft['solved']}/{sft['episodes']} | {_shown(sft['calls_per_solved'])} | "
        f"{_looks(sft, 'looked')} | {_looks(sft, 'acted')} |",
    ]
    for name, runs in (("verifier only", plain), ("with the bonus", bonus)):
        for r in runs:
            last = r["curve"][-1]
            lines.append(
                f"| {name}, seed {r['seed']} | {last['solved']}/{last['episodes']} | "
                f"{_shown(_calls(r))} | {_looks(last, 'looked')} | {_looks(last, 'acted')} |"
            )
    if plain and bonus and all(_calls(r) is not None for r in plain + bonus):
        a, b = [float(_calls(r)) for r in bonus], [float(_calls(r)) for r in plain]  # type: ignore[arg-type]
        change = mean_sd(a)[0] / mean_sd(b)[0] - 1 if mean_sd(b)[0] else 0.0
        verdict = compare(b, a)
        seed = "the seed: about -50% under Codex" if harness == "codex" else "the seed: -31%"
        lines += [
            "",
            f"**Finding (a bonus for fewer calls cuts calls on solved tasks through {harness}; {seed})**: "
            f"{change:+.0%} tool calls per solved held-out episode with the bonus ({mean_sd(a)[0]:.2f} ± "
            f"{mean_sd(a)[1]:.2f} vs {mean_sd(b)[0]:.2f} ± {mean_sd(b)[1]:.2f}); without it the count is "
            f"{verdict} the bonus runs', so the finding is **" + finding(verdict) + "** at this scale.",
        ]
    start_looks = sft.get("looks")
    if start_looks and all("looks" in r["curve"][-1] for r in plain + bonus):
        (ls, ln), (as_, an) = start_looks["looked"], start_looks["acted"]

        def looked(runs: list[dict[str, Any]]) -> str:
            return (
                f"{sum(r['curve'][-1]['looks']['looked'][1] for r in runs)} of "
                f"{sum(r['curve'][-1]['episodes'] for r in runs)}"
            )

        if first:
            lines += [
                "",
                f"Whether the extra call was harmless: at the start, the held-out episodes that looked first "
                f"solved {ls}/{ln} ({ls / max(ln, 1):.0%}), those that acted first {as_}/{an} "
                f"({as_ / max(an, 1):.0%}). The final evals looked first in {looked(plain)} episodes without the "
                f"bonus and {looked(bonus)} with it. Where looking costs solves, the verifier's reward alone "
                "removes it and the bonus has nothing left to cut; a fair test of the bonus needs an extra call "
                "that cannot cost the solve: section 3b lists after the write.",
            ]
        else:
            lines += [
                "",
                f"Whether the extra call was harmless: at the start, the held-out episodes that listed the "
                f"workspace solved {ls}/{ln} ({ls / max(ln, 1):.0%}), those that did not {as_}/{an} "
                f"({as_ / max(an, 1):.0%}). The final evals listed in {looked(plain)} episodes without the bonus "
                f"and {looked(bonus)} with it.",
            ]
    return [*lines, ""]


def _plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    start = results["start"]["solve_rate"]
    exact, naive, signal = results.get("exact", []), results.get("naive", []), results.get("signal", [])
    fig, (ax, zs) = plt.subplots(1, 2, figsize=(11, 4))
    for name, rs, style in (("exact", exact, "-"), ("naive", naive, "--"), ("signal sampler", signal, ":")):
        for r in rs:
            ax.plot(
                [0] + [p["step"] for p in r["curve"]],
                [start] + [p["solve_rate"] for p in r["curve"]],
                linestyle=style,
                marker="o",
                label=f"{name}, seed {r['seed']}",
            )
    ax.set_xlabel("GRPO step (0 = the teacher's SFT model)")
    ax.set_ylabel("held-out solve rate")
    ax.legend(fontsize=7)
    for name, rs, style in (("uniform", exact, "-"), ("signal sampler", signal, ":")):
        for r in rs:
            z = _zero_signal(r)
            zs.plot(range(1, len(z) + 1), z, linestyle=style, marker="o", label=f"{name}, seed {r['seed']}")
    zs.set_xlabel("GRPO step")
    zs.set_ylabel("share of groups with equal rewards")
    zs.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
