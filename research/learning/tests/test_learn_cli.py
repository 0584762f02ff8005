"""`research/learning/learn_cpu.py --set FIELD=VALUE`: any LearnConfig field from the command line (how a stage is run
at another size), validated by LearnConfig before anything runs; a bad one is a usage error naming the field."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parents[1]  # research/learning: its scripts (on sys.path: conftest.py)


def _usage_error(tmp_path: Path, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, str(HERE / "learn_cpu.py"), "--only-matrix", "--out", str(tmp_path), *args],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    assert not any(tmp_path.iterdir()), "a rejected setting must not start any stage"
    return done.stderr


def test_a_setting_is_parsed_as_json_where_it_is_json() -> None:
    from learn_cpu import setting

    assert setting("matrix_eval_tasks=16") == ("matrix_eval_tasks", 16)
    assert setting('matrix_harnesses=["pi", "codex"]') == ("matrix_harnesses", ["pi", "codex"])
    assert setting("transfer_harness=null") == ("transfer_harness", None)
    assert setting("transfer_harness=mini-swe-agent") == ("transfer_harness", "mini-swe-agent")


@pytest.mark.parametrize(
    ("arg", "named"),
    [
        ("matrix_eval_tasks=0", "matrix_eval_tasks"),
        ("no_such_field=1", "no_such_field"),
        ("matrix_long_mix=-1", "matrix_long_mix"),
        ('matrix_harnesses=["pi", "emacs"]', "matrix_harnesses"),
        ('shaping_runs=[["codex", "before"]]', "shaping_runs"),
        ('shaping_runs=["codex"]', "shaping_runs"),
    ],
)
def test_a_bad_setting_is_a_usage_error_naming_the_field(tmp_path: Path, arg: str, named: str) -> None:
    assert named in _usage_error(tmp_path, "--set", arg)


def test_a_setting_without_an_equals_sign_says_what_it_expects(tmp_path: Path) -> None:
    assert "expected FIELD=VALUE" in _usage_error(tmp_path, "--set", "matrix_eval_tasks")


def test_a_stage_run_here_replaces_its_part_of_the_page_and_the_others_keep_theirs(tmp_path: Path) -> None:
    """`--only-matrix` on a machine that never ran the findings or shaping stages rewrites the page with the new
    matrix and the committed findings and shaping, not with those sections gone."""
    import json

    from learn import LearnConfig
    from learn_cpu import saved_stages

    cfg = LearnConfig(
        out=tmp_path / "learn", shaping_runs=[("pi", "first"), ("pi", "after")]
    )  # codex: the page's
    cfg.matrix_dir.mkdir(parents=True)
    (cfg.matrix_dir / "results.json").write_text(json.dumps({"runs": {"pi": ["new"]}}))
    page = tmp_path / "learning-findings.json"
    page.write_text(
        json.dumps(
            {
                "findings": {"start": "old"},
                "shaping": {"plain": ["old"]},
                "shaping_after": {},
                "shaping_after_codex": {"plain": ["old codex"]},
                "matrix": {"runs": {"pi": ["old"]}},
            }
        )
    )
    assert saved_stages(cfg, page) == {
        "findings": {"start": "old"},
        "shaping": {"plain": ["old"]},
        "shaping_after": {},
        "shaping_codex": {},
        "shaping_after_codex": {"plain": ["old codex"]},
        "matrix": {"runs": {"pi": ["new"]}},
    }
    assert saved_stages(cfg)["findings"] == {}  # no page: only what this machine has
    # A harness shaped here is on the page even before the page knew it.
    codex = cfg.model_copy(update={"shaping_runs": [("pi", "first"), ("codex", "first")]})
    codex.shaping_dir_for("first", "codex").mkdir(parents=True)
    (codex.shaping_dir_for("first", "codex") / "results.json").write_text(
        json.dumps({"plain": ["new codex"]})
    )
    assert codex.shaping_dir_for("first", "codex").name == "shaping-codex"
    assert saved_stages(codex)["shaping_codex"] == {"plain": ["new codex"]}
