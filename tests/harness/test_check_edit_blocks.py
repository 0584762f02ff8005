"""`harness check` on a harness that acts through edit blocks (aider, cecli: no tools, one reply): the
dialect and oracle checks judge the blocks being applied, not a shell tool that such a harness never offers,
and still fail, by name, when the harness did not apply them."""

from __future__ import annotations

from pathlib import Path

from openenv.harness.catalog import get_spec
from openenv.harness.qualification import _Episode, _first_episode_checks, _oracle_check, _Run
from openenv.harness.summary import SequenceLine
from openenv.testing.results import episode_summary


def _episode(reward: float, *, tools: list[str] | None = None) -> _Episode:
    summary = episode_summary(
        harness="cecli",
        task="fix-deep-merge",
        policy="oracle",
        reward=reward,
        wall_s=1.0,
        tokens_sampled=10,
        tokens_trained=10,
        lineage=[SequenceLine(origin="new", parent=None, turns=1, tokens_trained=10)],
    )
    request = {"dialect": "openai_chat", "aux": False, "tools": tools or []}
    return _Episode(
        task="fix-deep-merge",
        sandbox="local",
        summary=summary,
        requests=[request],
        started=True,
        tail="Applied edit to merge.py",
        trajectory="-",
    )


def test_applied_edit_blocks_pass_the_dialect_and_oracle_checks_with_no_tools(tmp_path: Path):
    spec = get_spec("cecli")
    assert spec.edit_format == "diff"
    run = _Run(tmp_path, lambda _: None)
    assert _first_episode_checks(run, spec, _episode(1.0))
    assert _oracle_check(run, spec, [_episode(1.0)], "local", 0)
    dialect, oracle = run.rows[-2], run.rows[-1]
    assert dialect.ok and "diff edit blocks in the reply applied" in dialect.detail, dialect
    assert oracle.ok and "diff edit blocks applied" in oracle.detail, oracle


def test_edit_blocks_the_harness_did_not_apply_fail_the_dialect_check(tmp_path: Path):
    run = _Run(tmp_path, lambda _: None)
    assert not _first_episode_checks(run, get_spec("cecli"), _episode(0.0))
    row = run.rows[-1]
    assert row.check == "dialect" and row.ok is False and "did not apply our diff edit blocks" in row.detail


def test_a_tool_harness_with_no_tool_call_still_fails_the_oracle_check(tmp_path: Path):
    """The exemption is for edit-block harnesses only: pi solving with no tool call is not qualified."""
    run = _Run(tmp_path, lambda _: None)
    assert not _oracle_check(run, get_spec("pi"), [_episode(1.0, tools=["bash"])], "local", 0)
    assert "no tool call reached the harness" in run.rows[-1].detail
