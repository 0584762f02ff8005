"""The recipe's configuration (`research/learning/learn.py`): the lean harness specs, which training tasks each
stage sees, and the imperfect teacher's demonstrations. The stages themselves run in the smoke
(`test_learn_smoke.py`)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import yaml
from learn import (
    LEAN,
    LEAN_MINI_FLAGS,
    LEAN_PI_FLAGS,
    LearnConfig,
    append_commands,
    grpo_ids,
    heldout_ids,
    heldout_solve_rate,
    lean_envs,
    look_outcomes,
    oracle_ids,
    slipped_ids,
    teacher_tasks,
    transfer_ids,
)

from openenv.capture.canonical import Completion, ToolCallPart
from openenv.capture.trajectory import TurnRecord
from openenv.harness.tasks.fileops import kind_of
from openenv.resources import shipped_envs_dir
from tests.harness.tasks.fileops_grading import grade, starting_workspace


def _command(folder: Path, harness: str) -> list[str]:
    return list(yaml.safe_load((folder / harness / "spec.yaml").read_text())["command"])


def test_the_lean_specs_add_only_each_harness_own_flags_where_it_reads_them(tmp_path: Path) -> None:
    envs = lean_envs(tmp_path)
    assert sorted(p.name for p in envs.iterdir()) == sorted(LEAN)
    shipped_pi = _command(shipped_envs_dir(), "pi")
    at = shipped_pi.index("-p") + 1
    assert _command(envs, "pi") == [*shipped_pi[:at], *LEAN_PI_FLAGS, *shipped_pi[at:]]
    # mini-swe-agent reads `-c key=value` overrides after its config file: they go last.
    assert _command(envs, "mini-swe-agent") == [
        *_command(shipped_envs_dir(), "mini-swe-agent"),
        *LEAN_MINI_FLAGS,
    ]
    assert (
        "agent.instance_template={{task}}" in LEAN_MINI_FLAGS
    )  # the instruction alone, no 1,000-token preamble


def test_each_stage_sees_its_own_training_tasks_and_none_is_held_out(tmp_path: Path) -> None:
    cfg = LearnConfig(
        out=tmp_path, train_tasks=40, heldout_tasks=8, oracle_episodes=30, eval_tasks=8, transfer_demos=3
    )
    shown, sampled, second = set(oracle_ids(cfg)), set(grpo_ids(cfg)), set(transfer_ids(cfg))
    held = set(heldout_ids(cfg))
    assert (len(shown), len(sampled), len(second), len(held)) == (30, 10, 3, 8)
    assert not shown & sampled and not (shown | sampled) & held
    # The second harness demonstrates a few of the tasks pi's oracle did: what it adds is the harness.
    assert second <= shown
    assert transfer_ids(cfg) == transfer_ids(cfg)


def test_the_second_harness_grpo_has_its_own_steps_and_rate_and_measures_at_the_end() -> None:
    cfg = LearnConfig(transfer_grpo_steps=7, transfer_grpo_lr=2e-3)
    second = cfg.transfer_grpo()
    assert (second.grpo_steps, second.eval_every, second.grpo_lr) == (7, 7, 2e-3)
    assert (second.num_generations, second.groups_per_step, second.max_tokens) == (
        cfg.num_generations,
        cfg.groups_per_step,
        cfg.max_tokens,
    )
    assert cfg.transfer_dir == cfg.out / "transfer-mini-swe-agent"


def _solve_and_grade(task: Path, tmp_path: Path) -> float:
    """Run the task's `solution/solve.sh` in a copy of its starting files, then its own verifier; the reward."""
    workspace = starting_workspace(task, tmp_path)
    subprocess.run(["bash", str(task / "solution" / "solve.sh")], cwd=workspace, check=True)
    return grade(task, workspace, tmp_path)


def test_the_imperfect_teacher_overwrites_in_its_share_of_appends_and_the_real_verifier_fails_it(
    tmp_path: Path,
) -> None:
    cfg = LearnConfig(
        out=tmp_path / "run", train_tasks=40, heldout_tasks=8, oracle_episodes=30, teacher_slip=0.5
    )
    root = teacher_tasks(cfg)
    shown = oracle_ids(cfg)
    appends = [i for i in shown if kind_of(i) == "append"]
    slipped = slipped_ids(cfg)
    assert sorted(p.name for p in (root / "train").iterdir()) == shown
    assert set(slipped) <= set(appends) and len(slipped) == round(0.5 * len(appends)) > 0
    for task in shown:
        original, copy = cfg.tasks_dir / "train" / task, root / "train" / task
        assert (copy / "tests" / "check.py").read_text() == (original / "tests" / "check.py").read_text()
        right, taught = ((f / "solution" / "solve.sh").read_text() for f in (original, copy))
        assert taught == (right.replace(" >> ", " > ") if task in slipped else right)
    task = slipped[0]
    # The oracle's script solves it; the teacher's loses the file's first lines, and the verifier sees it.
    assert _solve_and_grade(cfg.tasks_dir / "train" / task, tmp_path / "oracle") == 1.0
    assert _solve_and_grade(root / "train" / task, tmp_path / "teacher") == 0.0
    assert LearnConfig(teacher_slip=None).teacher_slip is None  # the stage can be skipped


def _eval_folder(tmp_path: Path, episodes: dict[str, tuple[list[str | None], float]]) -> Path:
    """An `openenv eval` folder whose episodes ran `commands` (None: a turn that replied in text) for a reward."""
    folder = tmp_path / "eval"
    (folder / "episodes").mkdir(parents=True)

    def turn(index: int, command: str | None) -> dict[str, object]:
        calls = (
            ()
            if command is None
            else (ToolCallPart(id=f"call_{index}", name="bash", arguments=json.dumps({"command": command})),)
        )
        record = TurnRecord(
            id=f"t{index}",
            index=index,
            dialect="openai_chat",
            aux=False,
            source="sample",
            gap=None,
            sequence=0,
            parent=None,
            kind="new" if index == 0 else "merged",
            prompt_len=10,
            completion=Completion(id=f"t{index}", model="tiny", created=0, tool_calls=calls),
        )
        return {"type": "turn", **record.model_dump(mode="json")}

    report = []
    for name, (turns, reward) in episodes.items():
        (folder / "episodes" / f"{name}.jsonl").write_text(
            "".join(json.dumps(turn(i, t)) + "\n" for i, t in enumerate(turns))
        )
        report.append(
            {"summary": {"task": name, "reward": reward}, "trajectory": f"moved/episodes/{name}.jsonl"}
        )
    (folder / "results.json").write_text(json.dumps({"episodes": report}))
    return folder


def test_append_commands_reads_each_append_episodes_first_command_from_its_trajectory(tmp_path: Path) -> None:
    folder = _eval_folder(
        tmp_path,
        {
            "append-a": (["echo x >> notes.txt\n", "echo y > notes.txt"], 1.0),
            "append-b": (["echo x > notes.txt\n", "echo y >> notes.txt"], 0.0),
            "append-c": ([None, "echo x >> notes.txt"], 1.0),  # replied in text first, then ran it
            "append-d": ([None, None], 0.0),
            "append-e": (["cat notes.txt"], 0.0),
            "create-f": (["echo x > notes.txt\n"], 1.0),
        },
    )
    # The first command each append episode ran decides; create tasks are not counted.
    assert append_commands(folder) == {"append": 2, "overwrite": 1, "other": 2}


def test_look_outcomes_splits_episodes_by_whether_they_listed_the_workspace_before_or_after_acting(
    tmp_path: Path,
) -> None:
    folder = _eval_folder(
        tmp_path,
        {
            "append-a": (["ls -la", "echo x >> notes.txt"], 1.0),
            "append-b": (["ls", "echo x > notes.txt"], 0.0),
            "append-g": (["echo x >> notes.txt", "ls -la"], 1.0),  # the check after the write is a look too
            "create-c": (["echo x > notes.txt"], 1.0),
            "create-d": (["echo y > notes.txt"], 0.0),
            "create-e": ([None], 0.0),
            "create-f": (["lsof", "echo x > notes.txt"], 1.0),
        },
    )  # `lsof` is not a look
    assert look_outcomes(folder) == {"looked": [2, 3], "acted": [2, 4]}


def test_a_finished_held_out_eval_is_reused_with_its_own_wall_time_and_counted_by_kind(
    tmp_path: Path,
) -> None:
    cfg = LearnConfig(out=tmp_path / "run", train_tasks=20, heldout_tasks=6, oracle_episodes=10, eval_tasks=4)
    ids = heldout_ids(cfg)
    out = tmp_path / "eval"
    out.mkdir()
    episodes = [{"summary": {"task": task, "reward": float(i % 2 == 0)}} for i, task in enumerate(ids)]
    (out / "results.json").write_text(
        json.dumps(
            {
                "tasks": ids,
                "episodes": episodes,
                "rows": [
                    {
                        "harness": "pi",
                        "solved": 2,
                        "episodes": 4,
                        "solve_rate": 0.5,
                        "mean_tool_calls": 1.0,
                        "mean_turns": 2.0,
                    }
                ],
            }
        )
    )
    (out / "wall_s.json").write_text(json.dumps({"wall_s": 81.5}))
    rate = heldout_solve_rate(Path("no-such-model"), cfg, out)  # no eval runs: the model is never loaded
    kinds = [kind_of(task) for task in ids]
    assert rate["wall_s"] == 81.5 and (rate["solved"], rate["episodes"]) == (2, 4)
    assert rate["by_kind"] == {
        kind: [sum(kinds[i] == kind and i % 2 == 0 for i in range(4)), kinds.count(kind)]
        for kind in sorted(set(kinds))
    }
