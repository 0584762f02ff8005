"""The fileops task family: seeded, disjoint splits, Harbor folders the one loader reads, and a verifier
that scores the oracle's effect 1 and an untouched, forged or partly done workspace 0."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from openenv.harness.tasks import load_task_set
from openenv.harness.tasks.fileops import KINDS, generate, instances
from tests.harness.tasks.fileops_grading import grade, starting_workspace


def test_the_same_seed_gives_the_same_tasks_and_another_seed_others() -> None:
    first, again, other = instances(3, 200), instances(3, 200), instances(4, 200)
    assert [t.id for t in first] == [t.id for t in again]
    assert [t.id for t in first] != [t.id for t in other]
    assert len({t.id for t in first}) == 200
    assert {t.kind for t in first} == set(KINDS)


def test_the_splits_are_disjoint_and_load_as_harbor_tasks(tmp_path: Path) -> None:
    ids = generate(tmp_path, 0, train=300, heldout=40)
    assert len(ids["train"]) == 300 and len(ids["heldout"]) == 40
    assert not set(ids["train"]) & set(ids["heldout"])
    train = load_task_set(str(tmp_path / "train"))
    heldout = load_task_set(str(tmp_path / "heldout"))
    assert sorted(t.id for t in heldout) == ids["heldout"]
    assert len(train) == 300
    assert not {t.instruction for t in train} & {t.instruction for t in heldout}
    task = heldout[0]
    assert task.solution and not task.needs_build() and task.workdir == "/app"
    assert "expected.json" in task.tests and "check.py" in task.tests
    assert not set(task.tests) & set(task.workspace)  # the expectations never reach the agent


@pytest.mark.parametrize("kind", KINDS)
def test_the_oracle_scores_1_and_an_untouched_workspace_0(kind: str, tmp_path: Path) -> None:
    ids = generate(tmp_path / "tasks", 1, train=8, heldout=4)
    task_id = next(i for i in ids["train"] + ids["heldout"] if i.startswith(kind))
    task_dir = next((tmp_path / "tasks").glob(f"*/{task_id}"))
    untouched = starting_workspace(task_dir, tmp_path / "untouched")
    assert grade(task_dir, untouched, tmp_path) == 0.0
    solved = starting_workspace(task_dir, tmp_path / "solved")
    subprocess.run(["bash", str(task_dir / "solution" / "solve.sh")], cwd=solved, check=True)
    assert grade(task_dir, solved, tmp_path) == 1.0


def test_forgeries_score_0(tmp_path: Path) -> None:
    """A symlink to a file holding the word, a FIFO, extra lines, and a rename that leaves the old file."""
    ids = generate(tmp_path / "tasks", 2, train=40, heldout=4)
    create = next((tmp_path / "tasks" / "train").glob("create-*"))
    expected = json.loads((create / "tests" / "expected.json").read_text())
    ((name, lines),) = expected["files"].items()
    link = starting_workspace(create, tmp_path / "link")
    (link / "elsewhere").write_text(lines[0] + "\n")
    (link / name).symlink_to(link / "elsewhere")
    assert grade(create, link, tmp_path) == 0.0
    fifo = starting_workspace(create, tmp_path / "fifo")
    os.mkfifo(fifo / name)
    assert grade(create, fifo, tmp_path) == 0.0
    extra = starting_workspace(create, tmp_path / "extra")
    (extra / name).write_text(lines[0] + "\nreward 1\n")
    assert grade(create, extra, tmp_path) == 0.0
    rename = next(
        p for i in ids["train"] if i.startswith("rename-") for p in [tmp_path / "tasks" / "train" / i]
    )
    copied = starting_workspace(rename, tmp_path / "copied")
    subprocess.run(
        ["bash", "-c", (rename / "solution" / "solve.sh").read_text().replace("mv ", "cp ")],
        cwd=copied,
        check=True,
    )
    assert grade(rename, copied, tmp_path) == 0.0
