"""Harbor's own code (harbor==0.25.0, in its Python 3.12 venv made by scripts/install_harbor.sh) and
ours agree: its `Task` loader and ours read every fixture and built-in task the same way, and its
verifier's reward parser and ours give the same rewards (or both no reward) on a table of files."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from openenv.harness.rewards import NoReward, read_rewards
from openenv.harness.tasks import load_harbor_task
from openenv.harness.tasks.builtin import BUILTIN_DIR
from openenv.harness.tasks.harbor import HARBOR_AGENT_TIMEOUT_S

REPO = Path(__file__).resolve().parents[3]
HARBOR_PY = Path(os.environ.get("OPENENV_HARBOR_PYTHON", REPO / ".cache" / "harbor-venv" / "bin" / "python"))
VIEW = REPO / "tests" / "fixtures" / "harbor_crosscheck" / "harbor_view.py"
TASK_DIRS = sorted(
    p
    for root in (REPO / "tests" / "fixtures" / "harbor", BUILTIN_DIR)
    for p in root.iterdir()
    if (p / "task.toml").is_file()
)

# name -> (reward.json or None, reward.txt or None)
REWARD_CASES: dict[str, tuple[str | None, str | None]] = {
    "txt-one": (None, "1\n"),
    "txt-zero": (None, "0"),
    "txt-half-spaces": (None, "  0.5 \n"),
    "txt-empty": (None, ""),
    "txt-blank": (None, " \n"),
    "txt-word": (None, "passed\n"),
    "txt-two-lines": (None, "1\n0\n"),
    "txt-nan": (None, "nan\n"),
    "txt-inf": (None, "inf"),
    "json-reward": ('{"reward": 1.0, "tests_passed": 14}', None),
    "json-int": ('{"reward": 0}', None),
    "json-bool": ('{"reward": true}', None),
    "json-string": ('{"reward": "1"}', None),
    "json-nested": ('{"reward": {"a": 1}}', None),
    "json-nan": ('{"reward": NaN}', None),
    "json-infinity": ('{"reward": Infinity}', None),
    "json-broken": ('{"reward": ', None),
    "json-empty-file": ("", None),
    "json-wins-over-txt": ('{"reward": 0.0}', "1\n"),
    "json-broken-with-txt": ("oops", "1\n"),
    "none": (None, None),
}
# Harbor lets these through by accident (a non-object is returned as the "rewards"; {} has no reward);
# we give no reward. Asserted, so a change on either side shows up.
STRICTER = {"json-number": ("1", None), "json-empty-object": ("{}", None)}


def _harbor_view(args: list[str]) -> dict:
    if not HARBOR_PY.exists():
        pytest.skip(f"harbor==0.25.0 is not installed at {HARBOR_PY}; run scripts/install_harbor.sh")
    proc = subprocess.run(
        [str(HARBOR_PY), str(VIEW), *args], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def test_harbor_and_we_load_every_task_alike():
    theirs = _harbor_view([str(p) for p in TASK_DIRS])["tasks"]
    assert len(theirs) == len(TASK_DIRS) >= 21
    for folder in TASK_DIRS:
        ours, view = load_harbor_task(folder), theirs[folder.name]
        assert ours.metadata.get("name", ours.id) == view["name"], folder.name
        assert ours.instruction == view["instruction"], folder.name
        assert ours.schema_version == view["schema_version"], folder.name
        assert ours.timeout_s == (view["agent_timeout_sec"] or HARBOR_AGENT_TIMEOUT_S), folder.name
        assert ours.verifier_timeout_s == view["verifier_timeout_sec"], folder.name
        assert (ours.verifier_env, ours.solution_env) == (view["verifier_env"], view["solution_env"]), (
            folder.name
        )
        if view["workdir"] is not None:
            assert ours.workdir == view["workdir"], folder.name
        assert ours.image == view["docker_image"], folder.name
        assert ours.verifier_mode == (view["verifier_mode"] or "shared"), folder.name
        assert (ours.solution is not None) == view["has_solution"], folder.name


def _ours(folder: Path) -> dict:
    try:
        return {"rewards": read_rewards(folder)}
    except NoReward:
        return {"error": True}


def test_harbor_and_we_read_reward_files_alike(tmp_path):
    folders = []
    for name, (as_json, as_text) in {**REWARD_CASES, **STRICTER}.items():
        folder = tmp_path / name
        folder.mkdir()
        if as_json is not None:
            (folder / "reward.json").write_text(as_json)
        if as_text is not None:
            (folder / "reward.txt").write_text(as_text)
        folders.append(str(folder))
    theirs = _harbor_view(["--rewards", *folders])["rewards"]
    for name in REWARD_CASES:
        ours, view = _ours(tmp_path / name), theirs[name]
        if "error" in view:
            assert "error" in ours, (name, ours, view)
        else:
            assert ours == {"rewards": {k: float(v) for k, v in view["rewards"].items()}}, (name, view)
    for name in STRICTER:
        assert "rewards" in theirs[name] and "error" in _ours(tmp_path / name), name
