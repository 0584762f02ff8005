"""Edit blocks: a task's solution replayed in a throw-away sandbox and written as aider's SEARCH/REPLACE
blocks, which aider's own parser (from its pinned install) reads back and applies to the same files."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from openenv.capture.canonical import CanonicalRequest, Message, TextPart
from openenv.harness.catalog import get_spec
from openenv.harness.edit_blocks import EditsUnavailable, aider_diff_blocks, changed_files, solved_workspace
from openenv.harness.install import install_status, prefix
from openenv.harness.oracle import FINAL_TEXT, OraclePolicy
from openenv.harness.tasks import builtin_task, builtin_task_ids, load_harbor_task

TASK = builtin_task("fix-deep-merge")
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "harbor"
USER = Message(role="user", parts=(TextPart(text=TASK.instruction),))

# Aider's parser and its file replacement, run in aider's venv: stdin [{"reply", "files"}, ...], stdout the
# files after each reply's blocks were applied.
APPLY = """
import json, pathlib, sys, tempfile
from aider.coders.editblock_coder import DEFAULT_FENCE, do_replace, find_original_update_blocks
results = []
for job in json.load(sys.stdin):
    files = dict(job["files"])
    for block in find_original_update_blocks(job["reply"]):
        if block[0] is None:
            continue  # a shell command block: aider runs these itself
        path, search, replace = block
        tmp = pathlib.Path(tempfile.mkdtemp()) / "f"
        if path in files:
            tmp.write_text(files[path])
        new = do_replace(tmp, files.get(path, ""), search, replace, DEFAULT_FENCE)
        assert new is not None, f"aider could not apply the block for {path}"
        files[path] = new
    results.append(files)
print(json.dumps(results))
"""


def test_the_solution_becomes_one_block_per_changed_file():
    changes = changed_files(TASK.workspace, solved_workspace(TASK))
    assert list(changes) == ["config.py"]
    old, new = changes["config.py"]
    assert old == TASK.workspace["config.py"] and "deep_merge(merged[key], value)" in new
    blocks = aider_diff_blocks(changes)
    assert blocks.startswith("config.py\n```\n<<<<<<< SEARCH\n") and blocks.count(">>>>>>> REPLACE") == 1


def test_deletions_and_bytes_have_no_block():
    with pytest.raises(EditsUnavailable, match="deletes gone.py"):
        changed_files({"gone.py": "x"}, {})
    with pytest.raises(EditsUnavailable, match="bytes"):
        changed_files({}, {"blob.bin": b"\xff\xfe"})
    with pytest.raises(EditsUnavailable, match="marker"):  # aider would end the block at this line
        aider_diff_blocks({"notes.md": ("Title\n", "Title\n=======\n")})
    assert changed_files({"same.py": "x"}, {"same.py": b"x", "new.txt": b"hi"}) == {"new.txt": ("", "hi")}


def test_a_failing_solution_is_refused_with_its_output():
    broken = TASK.model_copy(update={"solution": "echo broken >&2; exit 3\n", "solution_files": {}})
    with pytest.raises(EditsUnavailable, match="exited 3"):
        solved_workspace(broken)


def test_the_oracle_sends_the_edits_and_a_bash_look_once_then_the_final_text():
    spec = get_spec("aider")
    policy = OraclePolicy(spec, TASK)
    reply = policy.reply(CanonicalRequest(messages=(USER,)))
    assert "<<<<<<< SEARCH" in reply and reply.rstrip().endswith("```bash\nls -la\n```")
    again = CanonicalRequest(messages=(USER, Message(role="assistant", parts=(TextPart(text=reply),)), USER))
    assert policy.reply(again) == FINAL_TEXT
    demo = OraclePolicy(spec, TASK, demonstrate=True).reply(CanonicalRequest(messages=(USER,)))
    assert demo == reply, "the demo writes the same blocks"


def test_a_solution_that_cannot_be_blocks_runs_as_the_shell_step_for_the_oracle_only():
    spec = get_spec("aider")
    deleting = TASK.model_copy(update={"solution": "rm config.py\n", "solution_files": {}})
    reply = OraclePolicy(spec, deleting).reply(CanonicalRequest(messages=(USER,)))
    assert "<<<<<<< SEARCH" not in reply and "```bash\nbash /solution/solve.sh\n```" in reply
    with pytest.raises(EditsUnavailable):
        OraclePolicy(spec, deleting, demonstrate=True).reply(CanonicalRequest(messages=(USER,)))


def test_aiders_own_parser_applies_the_blocks_to_the_solved_files():
    """Every built-in task and bash fixture: aider's parser, given the oracle's reply and the workspace,
    ends with exactly the files the solution writes."""
    spec = get_spec("aider")
    if not install_status(spec).ready:
        pytest.skip("aider is not installed; run scripts/install_harnesses.sh aider")
    tasks = [builtin_task(task_id) for task_id in builtin_task_ids()]
    tasks += [
        load_harbor_task(path) for path in sorted(FIXTURES.glob("bash-*")) if (path / "task.toml").is_file()
    ]
    jobs, solved = [], []
    for task in tasks:
        solved.append(solved_workspace(task))
        reply = OraclePolicy(spec, task).reply(CanonicalRequest(messages=(USER,)))
        assert "<<<<<<< SEARCH" in reply, task.id
        jobs.append(
            {"reply": reply, "files": {p: d for p, d in task.workspace.items() if isinstance(d, str)}}
        )
    ran = subprocess.run(
        [str(prefix(spec) / "bin" / "python"), "-c", APPLY],
        input=json.dumps(jobs),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr[-2000:]
    for task, files, after in zip(tasks, solved, json.loads(ran.stdout), strict=True):
        assert {path: data.decode() for path, data in files.items()} == after, task.id
