"""The CI smoke of the learning recipe (`research/learning/learn_cpu.py --smoke`, research/learning/learning.md): the whole chain
at toy sizes, through the real pi harness in local sandboxes, in one command. Oracle episodes -> token
export -> TRL SFT on the sampled tokens -> one GRPO step per mode (exact tokens, and rows re-tokenized
from text) -> held-out `openenv eval` of every model; then the imperfect teacher (its episodes recorded
through pi, scored by the real verifier, SFT on them as logged and on the verified ones, one GRPO step);
then the second harness (mini-swe-agent): its oracle's one demonstration, SFT from the pi model, one GRPO
step through it, its held-out evals; then the findings stage (issue 32): pi's echo of the oracle's replies
re-rendered as a naive proxy's rows, and one GRPO step each with exact rows, naive rows and the signal
sampler, whose results the findings page is written from; tool-call shaping (demonstrations that look first,
GRPO with and without the bonus; then again with the listing after the write; that again through codex, taught by
pi's demonstrations and one of codex's); and one harness or four (the teacher's demonstration through codex, one
GRPO step in pi, in codex and in their mix, each evaluated through both). The full run is a benchmark, not a test:
learning is not asserted here, only that every stage ran on what the previous one produced."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parents[1]  # research/learning: its scripts (on sys.path: conftest.py)


@pytest.mark.slow
@pytest.mark.extended  # the scheduled tier (tests/extended.py): 4-10 min of research per run
@pytest.mark.timeout(1800)  # ~4 min alone on 2 cores; 10+ min when the machine is shared
def test_the_recipe_runs_end_to_end_at_smoke_size(tmp_path: Path) -> None:
    out = tmp_path / "learn"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [
            sys.executable,
            str(HERE / "learn_cpu.py"),
            "--smoke",
            "--no-docs",
            "--seeds",
            "0",
            "--out",
            str(out),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=1700,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    results = json.loads((out / "results.json").read_text())
    split = json.loads((out / "tasks" / "split.json").read_text())
    assert not set(split["train"]) & set(split["heldout"])
    # SFT trained on the oracle's episodes, recorded through pi and exported as token rows.
    assert results["sft_train"]["rows"] >= 1 and results["sft_train"]["log"][-1]["loss"] > 0
    oracle = json.loads((out / "oracle" / "eval" / "results.json").read_text())
    assert oracle["rows"][0]["solved"] == oracle["rows"][0]["episodes"] == 4
    # The demonstrations hold the solutions' own commands (`--policy demo`), not a call of the script the
    # oracle's episodes alone have staged (the recipe taught `bash /solution/solve.sh` when they did).
    from openenv.export.log import read_episode

    for path in (out / "oracle" / "eval" / "episodes").glob("*.jsonl"):
        calls = [c for t in read_episode(path).turns if t.completion for c in t.completion.tool_calls]
        assert calls and calls[0].parsed_arguments()["command"].startswith("echo "), path
    # Every model was measured on the same held-out tasks by `openenv eval`.
    for name in ("random", "sft"):
        assert results[name]["episodes"] == 2 and 0 <= results[name]["solved"] <= 2
    assert results["random"]["solved"] == 0  # random weights never emit a valid tool call that solves
    for run in (results["grpo"][0], results["retokenized"]):
        assert [p["step"] for p in run["curve"]] == [1] and run["curve"][0]["episodes"] == 2
        assert len(run["train_reward"]) == 1
    assert results["retokenized"]["tokens"] == "retokenize"
    assert (out / "grpo-seed0" / "model" / "config.json").is_file()
    # The imperfect teacher: both smoke `append` demonstrations overwrite the file, so the real verifier
    # scores them 0; SFT on its episodes keeps them, SFT on the verified ones drops them.
    teacher = results["teacher"]
    assert teacher["slipped"] == 2
    recorded = json.loads((out / "teacher" / "oracle" / "eval" / "results.json").read_text())
    assert (recorded["rows"][0]["episodes"], recorded["rows"][0]["solved"]) == (4, 2)
    assert (teacher["rows"], teacher["verified_rows"]) == (4, 2)
    for name in ("sft", "verified_sft"):
        assert teacher[name]["episodes"] == 2 and sum(n for _, n in teacher[name]["by_kind"].values()) == 2
        appends = teacher[name]["by_kind"].get("append", [0, 0])[1]
        assert sum(teacher[name]["commands"].values()) == appends  # each append episode's command, classified
    for run in (*teacher["grpo"], teacher["retokenized"]):
        assert [p["step"] for p in run["curve"]] == [1] and len(run["train_reward"]) == 1
        assert sum(run["commands"].values()) == run["curve"][0]["by_kind"].get("append", [0, 0])[1]
    assert len(teacher["grpo"]) == 1 and teacher["retokenized"]["tokens"] == "retokenize"
    assert (out / "teacher" / "grpo-seed0" / "model" / "config.json").is_file()
    # The second harness: one demonstration recorded through mini-swe-agent, tuned into the SFT model
    # beside pi's rows, then GRPO and the held-out evals through mini-swe-agent.
    second = results["transfer"]
    assert (second["harness"], second["demos"]) == ("mini-swe-agent", 1)
    assert second["rows"] == results["sft_train"]["rows"] + 1
    mini_oracle = json.loads((out / "oracle-mini-swe-agent" / "eval" / "results.json").read_text())
    assert mini_oracle["rows"][0]["harness"] == "mini-swe-agent" and mini_oracle["rows"][0]["solved"] == 1
    for name in ("pi_sft", "sft"):
        assert second[name]["episodes"] == 2
    [run] = second["grpo"]
    assert run["harness"] == "mini-swe-agent" and [p["step"] for p in run["curve"]] == [1]
    assert len(run["train_reward"]) == 1
    # The findings stage: pi's echo measured (the smoke's only echo harness), then one GRPO step with exact
    # rows, one with naive rows, one with the signal sampler, each evaluated; the page is written from them.
    found = results["findings"]
    echo = found["echo"]["pi"]
    assert echo["episodes"] == 2 and not echo["errors"] and 0 < echo["changed"] < echo["sampled"]
    for variant in ("exact", "naive", "signal"):
        [run] = found[variant]
        assert [p["step"] for p in run["curve"]] == [1] and len(run["zero_signal"]) == len(
            run["train_reward"]
        ) == 1
    assert found["naive"][0]["tokens"] == "naive" and found["signal"][0]["signal_sampler"]
    assert found["exact"][0]["tokens"] == "exact" and not found["exact"][0]["signal_sampler"]
    assert json.loads((out / "findings" / "results.json").read_text())["signal"] == found["signal"]
    from learn_findings_docs import write_findings_docs

    # Tool-call shaping: half the demonstrations list the workspace first (one more call), the teacher's model tuned
    # on them, then one GRPO step with the verifier's reward alone and one with the tool-call bonus added.
    # The same with the listing right after the write (`--look-after`), on its own folder.
    for key, folder, at in (("shaping", "shaping", "first"), ("shaping_after", "shaping-after", "after")):
        shaping = results[key]
        assert (shaping["look_at"], shaping["looked"], shaping["rows"]) == (at, 2, 4)
        for name, calls in (("look", 2), ("plain", 1)):
            recorded = json.loads((out / folder / f"oracle-{name}" / "eval" / "results.json").read_text())
            assert recorded["rows"][0]["solved"] == 2 and recorded["rows"][0]["mean_tool_calls"] == calls
        [plain], [bonus] = shaping["plain"], shaping["bonus"]
        assert plain["tool_bonus"] is None and bonus["tool_bonus"] == shaping["tool_bonus"]
        for run in (plain, bonus):
            assert [p["step"] for p in run["curve"]] == [1] and "calls_per_solved" in run["curve"][0]
            looks = run["curve"][0][
                "looks"
            ]  # every eval's episodes split by whether they listed the workspace
            assert looks["looked"][1] + looks["acted"][1] == run["curve"][0]["episodes"]
        assert sum(n for _, n in shaping["sft"]["looks"].values()) == shaping["sft"]["episodes"]
    from openenv.export.log import read_episode as read

    after = next((out / "shaping-after" / "oracle-look" / "eval" / "episodes").glob("*.jsonl"))
    commands = [
        c.parsed_arguments()["command"]
        for t in read(after).turns
        if t.completion
        for c in t.completion.tool_calls
    ]
    assert commands[-1] == "ls -la" and commands[0].startswith("echo ")  # the listing came after the write
    # Shaping through codex: pi's demonstrations (the pi stage's, reused) and codex's own one, then GRPO and every
    # held-out eval through codex.
    assert "shaping_codex" not in results  # the look-first placement runs through pi only (`shaping_runs`)
    for key, folder in (("shaping_after_codex", "shaping-after-codex"),):
        shaping = results[key]
        assert shaping["harness"] == "codex" and shaping["rows_by_harness"] == {"pi": 4, "codex": 1}
        evals = [out / folder / "eval-tuned"] + [
            out / folder / f"{v}-seed0" / "eval-step-1" for v in ("plain", "bonus")
        ]
        for where in evals:
            assert json.loads((where / "results.json").read_text())["rows"][0]["harness"] == "codex"
        assert [len(shaping[v]) for v in ("plain", "bonus")] == [1, 1]
        [own] = [
            json.loads((out / folder / f"oracle-{n}" / "eval" / "results.json").read_text())
            for n in ("look", "plain")
            if (out / folder / f"oracle-{n}").is_dir()
        ]  # codex's one demonstration
        assert own["rows"][0]["harness"] == "codex" and own["rows"][0]["solved"] == 1
    # One harness or four: the teacher's demonstration through codex tuned into its start beside pi's rows, then
    # one GRPO step in pi, in codex and in their mix, and two in the mix (each harness its own episodes' worth),
    # each model evaluated through both harnesses.
    matrix = results["matrix"]
    assert matrix["harnesses"] == ["pi", "codex"] and matrix["demos"] == {"codex": 1}
    assert matrix["rows"] == teacher["rows"] + 1
    codex_demo = json.loads((out / "matrix" / "oracle-codex" / "eval" / "results.json").read_text())
    assert codex_demo["rows"][0]["harness"] == "codex" and codex_demo["rows"][0]["episodes"] == 1
    assert set(matrix["start"]) == {"pi", "codex"}
    assert sorted(matrix["runs"]) == ["codex", "mix", "mix_long", "pi"] and matrix["long_mix_steps"] == 2
    for name, [run] in matrix["runs"].items():
        assert run["harness"] == ("pi,codex" if name.startswith("mix") else name) and run["curve"] == []
        folder = out / "matrix" / f"{name.replace('_', '-')}-seed0"
        assert len(run["train_reward"]) == (2 if name == "mix_long" else 1)
        assert (folder / "model" / "config.json").is_file()
        assert {h: cell["episodes"] for h, cell in run["eval"].items()} == {"pi": 1, "codex": 1}
    shaped = ("shaping", "shaping_after", "shaping_after_codex")
    write_findings_docs(found, tmp_path, shaping={k: results[k] for k in shaped}, matrix=matrix)
    page = (tmp_path / "learning-findings.md").read_text()
    # Two findings from the findings stage and two from the matrix; shaping's when its held-out runs solved any.
    counted = sum(
        all(r["curve"][-1]["calls_per_solved"] is not None for r in results[k]["plain"] + results[k]["bonus"])
        for k in shaped
    )
    assert page.count("**Finding (a bonus") == counted and page.count("**Finding") == 4 + counted
    assert "| pi | 2 |" in page and (tmp_path / "learning-findings.png").is_file()
    assert "## 3. Tool-call shaping" in page and "| with the bonus, seed 0 |" in page and "## 3b." in page
    assert "## 3c. Tool-call shaping through codex, the listing after the write" in page
    assert "## 4. One harness or four" in page and "| mix | " in page and "| mix (2 steps) | " in page
    assert "Not measured" not in page
