"""The one-harness-or-four section of research/learning/learning-findings.md (`learn_findings_docs.py`): GRPO through
each harness alone and over their mix, every model evaluated through every harness."""

from __future__ import annotations

import statistics
from typing import Any

from learn_verdicts import compare, mean_sd

__all__ = ["matrix_lines"]


def _majority(verdicts: list[str]) -> str:
    """A finding's word from one `compare` verdict per harness: reproduced when most are above and none below,
    refuted when most are below, else undecided."""
    above, below = verdicts.count("above"), verdicts.count("below")
    if above > len(verdicts) / 2 and not below:
        return "reproduced"
    return "refuted" if below > len(verdicts) / 2 else "undecided"


def matrix_lines(matrix: dict[str, Any]) -> list[str]:
    """The transfer matrix (trained in x evaluated in, mean ± sd over seeds) and the seed's two verdicts."""
    harnesses, start, runs = matrix["harnesses"], matrix["start"], matrix["runs"]
    starts = [start, *matrix.get("start_repeats", [])]  # the start's evals: one per seed (one in older runs)
    base_rates = {h: [s[h]["solve_rate"] for s in starts] for h in harnesses}
    base = {h: statistics.mean(v) for h, v in base_rates.items()}

    def rates(name: str, h: str) -> list[float]:
        return [r["eval"][h]["solve_rate"] for r in runs.get(name, [])]

    def cell(values: list[float]) -> str:
        mean, sd = mean_sd(values)
        return f"{mean:.0%} ± {sd:.0%}" if len(values) > 1 else f"{mean:.0%}"

    long_steps = matrix.get("long_mix_steps")
    labels = {name: name for name in runs} | {"mix_long": f"mix ({long_steps} steps)"}

    wall = sum(r["wall_s"] for rs in runs.values() for r in rs)
    seeds = sorted({r["seed"] for rs in runs.values() for r in rs})
    lines = [
        "## 4. One harness or four (the transfer matrix)",
        "",
        f"The start: the imperfect teacher's SFT model (pi) tuned on {matrix['rows']} rows, the teacher's "
        f"pi rows and its demonstrations through "
        + ", ".join(f"{h} ({n})" for h, n in matrix["demos"].items())
        + f" (each harness lean through its own flags and config files: `openenv/train/lean.py`). From it, "
        f"{matrix['steps']} GRPO steps of {matrix['groups_per_step']} groups x {matrix['num_generations']} "
        f"episodes through each harness alone, and through the even mix of all {len(harnesses)} (a group's "
        f"episodes share a harness, drawn per group), so every run samples the same number of episodes"
        + (
            f"; and through the mix for {long_steps} steps, so each harness samples as many episodes in the mix "
            "as in its run alone"
            if runs.get("mix_long")
            else ""
        )
        + f"; seeds {', '.join(map(str, seeds))}; GRPO took {wall / 60:.0f} min in all. Each cell: held-out "
        f"solve rate on {matrix['eval_tasks']} tasks through the column's harness, mean ± sd over the seeds.",
        "",
        "| trained in \\ evaluated in | " + " | ".join(harnesses) + " | mean |",
        "|---|" + "---:|" * (len(harnesses) + 1),
        f"| the start{f' ({len(starts)} evals)' if len(starts) > 1 else ''} | "
        + " | ".join(cell(base_rates[h]) for h in harnesses)
        + f" | {statistics.mean(base.values()):.0%} |",
    ]
    for name in runs:
        if runs[name]:
            means = [statistics.mean(rates(name, h)) for h in harnesses]
            lines.append(
                f"| {labels[name]} | "
                + " | ".join(cell(rates(name, h)) for h in harnesses)
                + f" | {statistics.mean(means):.0%} |"
            )

    def by_run(key: str, shown: str) -> str:
        """`key` of each harness's cells at the start, after GRPO in it and after the mix runs (mean of seeds)."""
        parts = {
            h: [f"{start[h][key]:{shown}} at the start"] for h in harnesses if start[h].get(key) is not None
        }
        for h in parts:
            for name, label in (
                (h, f"in {h}"),
                ("mix", "in the mix"),
                ("mix_long", f"in the mix for {long_steps} steps"),
            ):
                values = [r["eval"][h].get(key) for r in runs.get(name, [])]
                if values and None not in values:
                    parts[h].append(f"{statistics.mean(values):{shown}} after GRPO {label}")
        return "; ".join(f"{h} " + ", ".join(p) for h, p in parts.items())

    if calls := by_run("mean_tool_calls", ".2f"):
        lines += [
            "",
            "Tool calls each harness parsed per held-out episode (the learner writing that harness's own "
            "tool call, its name and argument keys, where a malformed one is text and ends the episode): "
            + calls
            + ".",
        ]
    if offered := by_run("offered_call_share", ".0%"):
        lines += [
            "",
            "Of those calls, the share naming a tool the harness offers (the rest name another harness's "
            "tool, or a blend of names, and the harness rejects them): " + offered + ".",
        ]
    silent = {name: [v for r in rs for v in r.get("zero_signal", [])] for name, rs in runs.items()}
    if all(silent.values()):
        lines += [
            "",
            "GRPO groups whose rewards were all equal (no signal), share over every step and seed: "
            + ", ".join(f"{labels[name]} {statistics.mean(v):.0%}" for name, v in silent.items())
            + "."
            + (
                ""
                if max(statistics.mean(v) for v in silent.values()) < 1
                else " A run with no signal in any "
                "group has every advantage 0, so no gradient: its model is the start's, and its row differs "
                "from the start's only by the evals' sampling (each cell is one sampled episode per task)."
            ),
        ]
    # A harness the start never solves through (in any of its evals) cannot show the finding either way: GRPO in it
    # samples no success, so no group has signal and the run is the start's weights (measured: gradient 0).
    unsolved = [h for h in harnesses if runs.get(h) and not any(base_rates[h])]
    singles = [h for h in harnesses if runs.get(h) and h not in unsolved]
    gain_in = {h: [v - base[h] for v in rates(h, h)] for h in singles}  # per seed, in the harness trained in
    gain_elsewhere = {
        h: [
            statistics.mean(r["eval"][g]["solve_rate"] - base[g] for g in harnesses if g != h)
            for r in runs[h]
        ]
        for h in singles
    }  # per seed, mean over the other harnesses
    own = {h: compare(gain_in[h], gain_elsewhere[h]) for h in singles}
    word = _majority(list(own.values())) if own else "undecided"
    left_out = (
        (
            f" ({', '.join(unsolved)} left out: the start solved nothing through it in any eval, so GRPO in it "
            "had nothing to reinforce)"
        )
        if unsolved
        else ""
    )
    lines += [
        "",
        "**Finding (GRPO in one harness improves mostly that harness; the seed: OpenCode 34% -> 58%)**: "
        + (
            "the gain in the harness trained in is "
            if singles
            else "no harness the start solves through was trained in"
        )
        + "; ".join(
            f"{own[h]} the mean gain elsewhere for {h} ({statistics.mean(gain_in[h]):+.0%} vs "
            f"{statistics.mean(gain_elsewhere[h]):+.0%})"
            for h in singles
        )
        + left_out
        + f", so the finding is **{word}** at this scale.",
    ]
    if runs.get("mix"):
        tested = [
            h for h in harnesses if any(base_rates[h])
        ]  # the same rule: no success at the start, no signal

        def judged(name: str) -> tuple[str, str]:
            """The mix run `name` against the start: its verdict word and what it rests on."""
            mixed = {h: compare(rates(name, h), base_rates[h]) for h in tested}
            ups, downs = sum(v == "above" for v in mixed.values()), sum(v == "below" for v in mixed.values())
            word = "reproduced" if tested and ups == len(tested) else "refuted" if downs else "undecided"
            return word, (
                f"above the start in {ups} of {len(tested)} harnesses the start solves through and below "
                f"it in {downs} ("
                + ", ".join(f"{h}: {statistics.mean(rates(name, h)):.0%} vs {base[h]:.0%}" for h in harnesses)
                + ")"
            )

        equal_word, equal = judged("mix")
        word = equal_word
        text = (
            "the mix's runs end (by more than the larger spread, the runs' over seeds or the start's over its "
            f"evals) {equal}"
        )
        if runs.get("mix_long"):
            # The claim is about training over the mix; at equal total episodes it is judged on each harness's share.
            word, fair = judged("mix_long")
            alone = [h for h in tested if runs.get(h)]
            text += (
                f" at equal total episodes ({equal_word}); with each harness as many "
                f"episodes as alone ({long_steps} steps) they end {fair}, and that run decides"
                + (
                    "; against GRPO in the harness alone, with as many episodes in it: "
                    + ", ".join(
                        f"{h} {statistics.mean(rates('mix_long', h)):.0%} vs {statistics.mean(rates(h, h)):.0%}"
                        for h in alone
                    )
                    if alone
                    else ""
                )
            )
        lines += [
            "",
            "**Finding (GRPO over the mix improves every harness; the seed: 42% -> 54% on average)**: "
            + text
            + f", so the finding is **{word}** at this scale.",
        ]
    return [*lines, ""]
