"""`fileops`: a learnable task family, generated from a seed as real Harbor task folders.

Each instance is one short instruction with a verifiable effect in the workspace, answered by one
shell command (the oracle's `solution/solve.sh`):

| kind | instruction | solve.sh |
|---|---|---|
| `create` | Create a file named NAME containing the word WORD. | `echo WORD > NAME` |
| `append` | Append the word WORD as a new line at the end of NAME. | `echo WORD >> NAME` |
| `rename` | Rename the file SRC to DST. | `mv SRC DST` |
| `typo`   | In NAME, the word BAD is a typo for GOOD; fix it. | `sed -i 's/BAD/GOOD/' NAME` |

It exists so that a small model trained on this machine can be *shown* to learn through a real harness
(issue 21, `research/learning/learning.md`): the slots come from small closed vocabularies, so a model with a few
hundred thousand weights can learn to copy them, while the held-out split holds (kind, slots)
combinations that no training instance has (no held-out instruction is a training instruction). `generate(out, seed)` writes `out/train/<id>/` and
`out/heldout/<id>/`; both load with the one Harbor loader (`load_task_set(folder)`).

The verifier (`tests/check.py`, run as `python3 -I -S` once every agent process is dead) reads the
workspace as data only: it never imports or runs anything the agent wrote. It wants regular files
(a symlink to a file holding the word is not the file), capped in size, with exactly the expected lines,
and a renamed file's old name gone. The expectations live in `tests/`, which the agent never sees.

Usage: python -m openenv.harness.tasks.fileops --out DIR [--seed 0] [--train 400] [--heldout 64]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

__all__ = ["KINDS", "FileOpsTask", "Kind", "generate", "instances", "kind_of", "main", "write_task"]

Kind = Literal["create", "append", "rename", "typo"]
KINDS: tuple[Kind, ...] = ("create", "append", "rename", "typo")

STEMS = (
    "notes",
    "todo",
    "data",
    "plan",
    "list",
    "draft",
    "memo",
    "ideas",
    "items",
    "report",
    "words",
    "story",
)
EXTS = (".txt", ".md")
WORDS = (
    "apple",
    "river",
    "stone",
    "cloud",
    "green",
    "tiger",
    "piano",
    "lemon",
    "ocean",
    "maple",
    "candle",
    "rocket",
    "silver",
    "garden",
    "pepper",
    "violet",
)

CHECK_PY = '''"""The fileops verifier: compares the workspace with the expectations in expected.json and writes
/logs/verifier/reward.json. Stdlib only; reads the agent's files as bytes, never runs them."""

import json
import os
import stat
import sys

LIMIT = 64 * 1024


def read_regular(path):
    """The file's bytes, or None unless it is a regular file (not a link, FIFO or folder) under LIMIT."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > LIMIT:
            return None
        return os.read(fd, LIMIT + 1)
    finally:
        os.close(fd)


def main():
    tests_dir = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(tests_dir, "expected.json")) as fh:
        expected = json.load(fh)
    workspace = os.environ.get("WORKSPACE", os.getcwd())
    checks = []
    for name, lines in sorted(expected["files"].items()):
        data = read_regular(os.path.join(workspace, name))
        want = "".join(line + "\\n" for line in lines).encode()
        ok = data is not None and data.rstrip(b"\\n") == want.rstrip(b"\\n")
        checks.append(ok)
        print(("ok  " if ok else "FAIL"), name, "expected lines", lines)
    for name in expected.get("absent", []):
        ok = not os.path.lexists(os.path.join(workspace, name))
        checks.append(ok)
        print(("ok  " if ok else "FAIL"), name, "must not exist")
    solved = bool(checks) and all(checks)
    reward_dir = os.environ.get("REWARD_DIR", "/logs/verifier")
    with open(os.path.join(reward_dir, "reward.json"), "w") as fh:
        json.dump({"reward": 1.0 if solved else 0.0}, fh)
    return 0 if solved else 1


if __name__ == "__main__":
    sys.exit(main())
'''

TEST_SH = """#!/bin/sh
# The fileops verifier: -I -S, so no PYTHON* variable and no site hook the agent planted runs.
exec python3 -I -S "${TESTS_DIR:-/tests}/check.py"
"""

TASK_TOML = """schema_version = "1.4"

[metadata]
kind = "{kind}"
family = "fileops"

[agent]
timeout_sec = 120

[verifier]
timeout_sec = 30
"""

DOCKERFILE = """FROM openenv/base:latest
WORKDIR /app
COPY app/ /app/
"""


@dataclass(frozen=True)
class FileOpsTask:
    """One instance: what the agent reads, starts from and must leave behind."""

    id: str
    kind: Kind
    instruction: str
    solution: str
    workspace: dict[str, str]
    expected: dict[str, list[str]]
    absent: list[str] = field(default_factory=list)


def kind_of(task_id: str) -> str:
    """The kind of a fileops task, read from its id (`_make` starts every id with it: `append-notes-txt-...`)."""
    return task_id.split("-", 1)[0]


def _typo(word: str, rng: random.Random) -> str:
    """A one-character typo of `word`: two neighbouring letters swapped, or one letter doubled."""
    while True:
        i = rng.randrange(len(word) - 1)
        swapped, doubled = (
            word[:i] + word[i + 1] + word[i] + word[i + 2 :],
            word[:i] + word[i] * 2 + word[i + 1 :],
        )
        bad = swapped if rng.random() < 0.5 else doubled
        if bad != word:
            return bad


def _make(kind: Kind, rng: random.Random) -> FileOpsTask:
    name = rng.choice(STEMS) + rng.choice(EXTS)
    word = rng.choice(WORDS)
    others = [w for w in WORDS if w != word]
    filler = "scratch workspace"
    if kind == "create":
        return FileOpsTask(
            id=f"create-{name.replace('.', '-')}-{word}",
            kind=kind,
            instruction=f"Create a file named {name} containing the word {word}.",
            solution=f"echo {word} > {name}\n",
            workspace={"README": filler + "\n"},
            expected={name: [word]},
        )
    if kind == "append":
        first = rng.sample(others, 2)
        return FileOpsTask(
            id=f"append-{name.replace('.', '-')}-{word}-{'-'.join(first)}",
            kind=kind,
            instruction=f"Append the word {word} as a new line at the end of {name}.",
            solution=f"echo {word} >> {name}\n",
            workspace={name: "".join(w + "\n" for w in first)},
            expected={name: [*first, word]},
        )
    if kind == "rename":
        dst = rng.choice([s for s in STEMS if not name.startswith(s + ".")]) + rng.choice(EXTS)
        return FileOpsTask(
            id=f"rename-{name.replace('.', '-')}-{dst.replace('.', '-')}-{word}",
            kind=kind,
            instruction=f"Rename the file {name} to {dst}.",
            solution=f"mv {name} {dst}\n",
            workspace={name: word + "\n"},
            expected={dst: [word]},
            absent=[name],
        )
    before, after = rng.sample(others, 2)
    bad = _typo(word, rng)
    return FileOpsTask(
        id=f"typo-{name.replace('.', '-')}-{word}-{bad}-{before}-{after}",
        kind=kind,
        instruction=f"In {name}, the word {bad} is a typo for {word}; fix it.",
        solution=f"sed -i 's/{bad}/{word}/' {name}\n",
        workspace={name: f"{before}\n{bad}\n{after}\n"},
        expected={name: [before, word, after]},
    )


def instances(seed: int, count: int, kinds: tuple[Kind, ...] = KINDS) -> list[FileOpsTask]:
    """`count` distinct instances, drawn from `seed`, kinds in turn. Distinct means distinct instructions
    (and so distinct ids): two instances that read the same would let a model memorize a held-out answer."""
    rng = random.Random(seed)
    seen: dict[str, FileOpsTask] = {}
    attempts = 0
    while len(seen) < count:
        attempts += 1
        if attempts > count * 50:
            raise ValueError(
                f"the fileops vocabulary has fewer than {count} distinct instances of kinds {kinds}"
            )
        task = _make(kinds[len(seen) % len(kinds)], rng)
        seen.setdefault(task.instruction, task)
    return list(seen.values())


def write_task(task: FileOpsTask, folder: Path) -> Path:
    """Write one instance as a Harbor task folder."""
    folder.mkdir(parents=True)
    (folder / "instruction.md").write_text(task.instruction + "\n")
    (folder / "task.toml").write_text(TASK_TOML.format(kind=task.kind))
    app = folder / "environment" / "app"
    app.mkdir(parents=True)
    (folder / "environment" / "Dockerfile").write_text(DOCKERFILE)
    for name, text in task.workspace.items():
        (app / name).write_text(text)
    (folder / "solution").mkdir()
    (folder / "solution" / "solve.sh").write_text(task.solution)
    tests = folder / "tests"
    tests.mkdir()
    (tests / "test.sh").write_text(TEST_SH)
    (tests / "test.sh").chmod(0o755)
    (tests / "check.py").write_text(CHECK_PY)
    (tests / "expected.json").write_text(
        json.dumps({"files": task.expected, "absent": task.absent}, indent=1)
    )
    return folder


def generate(
    out: Path, seed: int = 0, *, train: int = 400, heldout: int = 64, kinds: tuple[Kind, ...] = KINDS
) -> dict[str, list[str]]:
    """Write `out/train/` and `out/heldout/` (replacing them) and `out/split.json`; returns the ids.

    The two splits are one draw of distinct instances cut in two, so no held-out instance (kind and
    every slot) is in the training split.
    """
    drawn = instances(seed, train + heldout, kinds)
    rng = random.Random(seed + 1)
    rng.shuffle(drawn)
    splits = {"heldout": drawn[:heldout], "train": drawn[heldout:]}
    for name, tasks in splits.items():
        shutil.rmtree(out / name, ignore_errors=True)
        for task in tasks:
            write_task(task, out / name / task.id)
    ids = {name: sorted(t.id for t in tasks) for name, tasks in splits.items()}
    (out / "split.json").write_text(json.dumps({"seed": seed, "kinds": list(kinds), **ids}, indent=1))
    return ids


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--train", type=int, default=400)
    parser.add_argument("--heldout", type=int, default=64)
    parser.add_argument(
        "--kinds", default=",".join(KINDS), help="comma-separated subset of " + ",".join(KINDS)
    )
    args = parser.parse_args(argv)
    kinds = tuple(k.strip() for k in args.kinds.split(",") if k.strip())
    bad = sorted(set(kinds) - set(KINDS))
    if bad:
        parser.error(f"unknown kinds {bad}; known: {', '.join(KINDS)}")
    ids = generate(args.out, args.seed, train=args.train, heldout=args.heldout, kinds=kinds)
    print(f"{len(ids['train'])} train and {len(ids['heldout'])} held-out fileops tasks in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
