"""The transfer matrix on the findings page (`research/learning/learn_findings_docs.py`): the table is the runs' numbers and
each verdict follows the documented rule (a difference counts when it is larger than the seed spread)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from learn_findings_docs import write_findings_docs  # research/learning (on sys.path: conftest.py)


def _cell(rate: float) -> dict[str, Any]:
    return {"solve_rate": rate, "solved": round(rate * 32), "episodes": 32, "mean_tool_calls": 0.5 + rate}


def _matrix(finals: dict[str, list[dict[str, float]]], start: dict[str, float]) -> dict[str, Any]:
    """A matrix stage's results: `finals[trained_in]` is one {harness: rate} per seed."""
    return {
        "harnesses": list(start),
        "demos": {h: 48 for h in start if h != "pi"},
        "rows": 400,
        "steps": 12,
        "groups_per_step": 4,
        "num_generations": 4,
        "eval_tasks": 32,
        "start": {h: _cell(r) for h, r in start.items()},
        "runs": {
            name: [
                {
                    "seed": seed,
                    "wall_s": 600.0,
                    "eval": {h: _cell(r) for h, r in rates.items()},
                    "zero_signal": [0.5, 1.0 if name == "codex" else 0.5],
                }
                for seed, rates in enumerate(per_seed)
            ]
            for name, per_seed in finals.items()
        },
    }


def _page(tmp_path: Path, matrix: dict[str, Any]) -> str:
    write_findings_docs({}, tmp_path, matrix=matrix)
    return (tmp_path / "learning-findings.md").read_text()


def test_gains_mostly_where_trained_and_everywhere_from_the_mix_reproduce_both_findings(
    tmp_path: Path,
) -> None:
    start = {"pi": 0.5, "codex": 0.4}
    own = [{"pi": 0.70 + s / 100, "codex": 0.41} for s in range(3)]
    other = [{"pi": 0.51, "codex": 0.60 + s / 100} for s in range(3)]
    mix = [{"pi": 0.60 + s / 100, "codex": 0.50 + s / 100} for s in range(3)]
    page = _page(tmp_path, _matrix({"pi": own, "codex": other, "mix": mix}, start))
    assert "| the start | 50% | 40% | 45% |" in page
    assert "| pi | 71% ± 1% | 41% ± 0% | 56% |" in page and "| mix | 61% ± 1% | 51% ± 1% | 56% |" in page
    assert page.count("**reproduced**") == 2 and "Not measured" in page  # shaping was not in this run
    # How often each harness parsed a tool call, at the start and after GRPO in it and in the mix (mean of seeds).
    assert (
        "pi 1.00 at the start, 1.21 after GRPO in pi, 1.11 after GRPO in the mix; codex 0.90 at the start"
        in page
    )
    assert "share over every step and seed: pi 50%, codex 75%, mix 50%." in page and "no gradient" not in page


def test_a_harness_the_mix_leaves_below_its_start_refutes_the_mix_finding(tmp_path: Path) -> None:
    start = {"pi": 0.5, "codex": 0.4}
    same = [{"pi": 0.60 + s / 100, "codex": 0.50 + s / 100} for s in range(3)]  # gains equal everywhere
    mix = [{"pi": 0.70 + s / 100, "codex": 0.30 + s / 100} for s in range(3)]
    page = _page(tmp_path, _matrix({"pi": same, "codex": same, "mix": mix}, start))
    one, four = (line for line in page.splitlines() if line.startswith("**Finding"))
    assert "**undecided**" in one  # trained-in gain within the spread of the gain elsewhere
    assert "below it in 1" in four and "**refuted**" in four


def _shaping(at: str, plain: list[float], bonus: list[float], harness: str | None = None) -> dict[str, Any]:
    """A shaping stage's results (demonstrations listing `at`, through `harness`; None: results from before there
    were others, pi's): final calls per solved episode per seed."""

    def run(seed: int, calls: float) -> dict[str, Any]:
        return {
            "seed": seed,
            "curve": [
                {
                    "step": 12,
                    "solved": 40,
                    "episodes": 64,
                    "calls_per_solved": calls,
                    "looks": {"looked": [20, 24], "acted": [20, 40]},
                }
            ],
        }

    return {
        "look_at": at,
        "looked": 30,
        "rows": 60,
        "tool_bonus": [0.5, 4],
        "steps": 12,
        "sft": {
            "solved": 30,
            "episodes": 64,
            "calls_per_solved": 1.5,
            "looks": {"looked": [15, 32], "acted": [15, 32]},
        },
        "plain": [run(s, c) for s, c in enumerate(plain)],
        "bonus": [run(s, c) for s, c in enumerate(bonus)],
        **({"harness": harness, "rows_by_harness": {"pi": 40, harness: 20}} if harness else {}),
    }


def test_both_shaping_stages_get_a_section_and_a_verdict_of_their_own(tmp_path: Path) -> None:
    write_findings_docs(
        {},
        tmp_path,
        shaping={
            "shaping": _shaping("first", [1.0, 1.0, 1.0], [1.0, 1.0, 1.0]),
            "shaping_after": _shaping("after", [1.6, 1.5, 1.7], [1.1, 1.0, 1.2]),
        },
    )
    page = (tmp_path / "learning-findings.md").read_text()
    first, after = page.split("## 3. Tool-call shaping")[1].split(
        "## 3b. Tool-call shaping, the listing after"
    )
    assert "before acting" in first and "--look-first`" in first and "**undecided**" in first
    assert (
        "right after acting" in after
        and "--look-after`" in after
        and "| listed: solved / episodes |" in after
    )
    # 1.10 vs 1.60 calls per solved episode, beyond both spreads (0.10): the bonus cut calls, as the seed found.
    assert (
        "-31% tool calls per solved held-out episode with the bonus (1.10" in after
        and "**reproduced**" in after
    )
    assert "listed the workspace solved 15/32" in after
    assert (
        'through a harness other than pi** (`--only-shaping --set \'shaping_runs=[["codex"' in page
    )  # only pi's ran


def test_a_shaping_stage_not_run_is_said_so(tmp_path: Path) -> None:
    write_findings_docs(
        {}, tmp_path, shaping={"shaping": _shaping("first", [1.2, 1.3, 1.2], [1.0, 1.0, 1.0])}
    )
    page = (tmp_path / "learning-findings.md").read_text()
    assert "## 3b." not in page and "listing after the write** (`--only-shaping" in page


def test_each_harness_shaped_gets_its_own_section_and_verdict_against_the_seeds_figure_for_it(
    tmp_path: Path,
) -> None:
    import json

    stages = {
        "shaping": _shaping("first", [1.2, 1.3, 1.2], [1.0, 1.0, 1.0]),
        "shaping_after": _shaping("after", [1.6, 1.5, 1.7], [1.5, 1.6, 1.6], "pi"),
        "shaping_after_codex": _shaping("after", [2.0, 2.1, 1.9], [1.0, 1.1, 1.0], "codex"),
    }
    write_findings_docs({}, tmp_path, shaping=stages)
    page = (tmp_path / "learning-findings.md").read_text()
    pi_after, codex = page.split("## 3b. Tool-call shaping, the listing after the write")[1].split(
        "## 3c. Tool-call shaping through codex, the listing after the write"
    )
    assert (
        "steps through pi from" in pi_after and "**undecided**" in pi_after
    )  # 1.57 vs 1.60: within the spread
    assert "through pi (40 rows) and through codex (20," in codex and "held-out through codex 30/64" in codex
    assert "GRPO steps through codex from that model" in codex
    assert (
        "through codex; the seed: about -50% under Codex)**: -48% tool calls" in codex
        and "**reproduced**" in codex
    )
    assert "harness other than pi" not in page
    # The JSON beside the page keeps every stage under its key, so `--docs-only` rebuilds the same sections.
    assert (
        json.loads((tmp_path / "learning-findings.json").read_text())["shaping_after_codex"]
        == stages["shaping_after_codex"]
    )


def test_a_run_without_signal_in_any_group_is_said_to_have_left_the_start_unchanged(tmp_path: Path) -> None:
    start = {"pi": 0.5, "codex": 0.0}
    flat = [{"pi": 0.5 + s / 100, "codex": 0.0} for s in range(3)]
    matrix = _matrix({"pi": flat, "codex": flat}, start)
    for run in matrix["runs"]["codex"]:
        run["zero_signal"] = [1.0, 1.0]
    page = _page(tmp_path, matrix)
    assert "codex 100%." in page and "no gradient: its model is the start's" in page


def test_the_start_is_the_mean_of_its_evals_and_the_mix_is_judged_against_their_spread(
    tmp_path: Path,
) -> None:
    start = {"pi": 0.5, "codex": 0.20}
    matrix = _matrix(
        {
            "pi": [{"pi": 0.6, "codex": 0.1}] * 3,
            "codex": [{"pi": 0.5, "codex": 0.3}] * 3,
            "mix": [{"pi": 0.60, "codex": 0.12}, {"pi": 0.61, "codex": 0.12}, {"pi": 0.62, "codex": 0.12}],
        },
        start,
    )
    # One lucky draw of the start through codex (20%); its other evals 10% and 12%: the mix's 12% is within that.
    matrix["start_repeats"] = [
        {"pi": _cell(0.5), "codex": _cell(0.10)},
        {"pi": _cell(0.5), "codex": _cell(0.12)},
    ]
    page = _page(tmp_path, matrix)
    assert "| the start (3 evals) | 50% ± 0% | 14% ± 5% | 32% |" in page
    four = next(line for line in page.splitlines() if line.startswith("**Finding (GRPO over the mix"))
    assert "below it in 0" in four and "codex: 12% vs 14%" in four and "**undecided**" in four


def test_a_harness_the_start_never_solves_through_is_left_out_of_the_first_verdict(tmp_path: Path) -> None:
    start = {"pi": 0.5, "codex": 0.2, "gemini-cli": 0.0}
    own = [{"pi": 0.70 + s / 100, "codex": 0.21, "gemini-cli": 0.0} for s in range(3)]
    other = [{"pi": 0.51, "codex": 0.40 + s / 100, "gemini-cli": 0.0} for s in range(3)]
    # No signal in gemini-cli: its runs are the start, and eval noise elsewhere would read as "below".
    stuck = [{"pi": 0.60 + s / 100, "codex": 0.3, "gemini-cli": 0.0} for s in range(3)]
    mix = [{"pi": 0.60 + s / 100, "codex": 0.30 + s / 100, "gemini-cli": 0.0} for s in range(3)]
    page = _page(tmp_path, _matrix({"pi": own, "codex": other, "gemini-cli": stuck, "mix": mix}, start))
    one, four = (line for line in page.splitlines() if line.startswith("**Finding"))
    assert "for pi (+21% vs +0%)" in one and "for gemini-cli (" not in one
    assert "gemini-cli left out: the start solved nothing through it" in one and "**reproduced**" in one
    # The mix is judged by the same rule: above the start in both harnesses that can move, so reproduced.
    assert "in 2 of 2 harnesses the start solves through" in four and "**reproduced**" in four


def test_the_mix_run_with_each_harness_getting_its_own_episodes_decides_the_mix_finding(
    tmp_path: Path,
) -> None:
    """At equal total episodes each harness gets a share of the mix; the longer mix run (each harness as many
    episodes as alone) is its own row, and the mix verdict is that run's, with the equal-episodes one beside it."""
    start = {"pi": 0.5, "codex": 0.4}
    single = [{"pi": 0.60 + s / 100, "codex": 0.50 + s / 100} for s in range(3)]
    flat = [{"pi": 0.50 + s / 100, "codex": 0.40 + s / 100} for s in range(3)]  # equal episodes: no change
    long = [{"pi": 0.70 + s / 100, "codex": 0.60 + s / 100} for s in range(3)]
    matrix = _matrix({"pi": single, "codex": single, "mix": flat, "mix_long": long}, start)
    matrix["long_mix_steps"] = 48
    matrix["start"]["codex"]["offered_call_share"] = 0.5  # pi's cells have none: no calls to name a tool
    for name, runs in matrix["runs"].items():
        for run in runs:
            run["eval"]["codex"]["offered_call_share"] = 0.1 if name == "mix_long" else 0.5
    page = _page(tmp_path, matrix)
    assert (
        "the share naming a tool the harness offers (the rest name another harness's tool, or a blend of "
        "names, and the harness rejects them): codex 50% at the start, 50% after GRPO in codex, 50% after "
        "GRPO in the mix, 10% after GRPO in the mix for 48 steps."
    ) in page
    assert "| mix | 51% ± 1% | 41% ± 1% | 46% |" in page
    assert "| mix (48 steps) | 71% ± 1% | 61% ± 1% | 66% |" in page
    assert "through the mix for 48 steps, so each harness samples as many episodes" in page
    assert "0.91 after GRPO in the mix, 1.11 after GRPO in the mix for 48 steps." in page
    assert "mix 50%, mix (48 steps) 50%." in page
    four = [line for line in page.splitlines() if line.startswith("**Finding")][1]
    assert "above the start in 0 of 2 harnesses the start solves through and below it in 0" in four
    assert "at equal total episodes (undecided)" in four and "they end above the start in 2 of 2" in four
    assert (
        "against GRPO in the harness alone, with as many episodes in it: pi 71% vs 61%, codex 61% vs 51%"
        in four
    )
    assert four.endswith("so the finding is **reproduced** at this scale.")
    # Without the longer run, the equal-episodes run decides, as before.
    del matrix["runs"]["mix_long"]
    four = [line for line in _page(tmp_path, matrix).splitlines() if line.startswith("**Finding")][1]
    assert "**undecided**" in four and "48 steps" not in four
