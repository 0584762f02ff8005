"""Long, branching episodes with real harness CLIs: every policy token trains once, exactly.

`openenv run --policy long` starts each harness as its spec's `long_episode` recipe says (a sub-agent
tool, an early compaction threshold) and drives it: a sub-agent call (Claude Code's Agent, OpenCode's
task), context filled until the harness compacts, a summary, then the task's solution in the compacted
conversation. Each reply is tokenized and scored by the session's vLLM like a sampled turn. Checked on
the trajectory the CLI wrote:

- every policy turn is in exactly one training row, at the offset its prompt length says, with its own
  token ids and logprobs under `env_mask` 1, and `env_mask` is 0 on exactly the tokens between turns;
- each row's logprobs equal a float32 transformers teacher-forced recompute over the row itself;
- the rows' lineage (origin, parent) is what the harness really did.
"""

from __future__ import annotations

import pytest

from openenv.testing.teacher import teacher_logprobs
from tests.harness.long.conftest import LongRun

pytestmark = [pytest.mark.slow, pytest.mark.vllm]

# What each harness really does under the long policy, as (origin, parent) per training row.
LINEAGE = {
    # main; the Agent tool's conversation; the summary request (a fork of the main history: the history up
    # to an earlier turn plus "respond with text only"); the main conversation resumed from the summary.
    "claude-code": [("new", None), ("sub-agent", 0), ("compaction", 0), ("compaction", 0)],
    # main; the task tool's conversation; the summarization agent (no tools); the resumed main conversation.
    "opencode": [("new", None), ("sub-agent", 0), ("compaction", 0), ("compaction", 0)],
    # main; the checkpoint request (the history plus an instruction, no tools); the resumed conversation.
    "codex": [("new", None), ("compaction", 0), ("compaction", 0)],
}
AUX_TURNS = {"opencode": 1}  # its title generator


def check_rows_are_exact(run: LongRun) -> None:
    """Every policy turn in exactly one row, at its place; env_mask 0 exactly between turns."""
    log = run.log
    turns = {t.id: t for t in log.turns}
    policy = [t for t in log.turns if not t.aux and t.completion is not None and not t.budget]
    owners = {t.id: [i for i, row in enumerate(log.sequences) if t.id in row.turn_ids] for t in policy}
    assert all(len(rows) == 1 for rows in owners.values()), owners
    assert {tid for row in log.sequences for tid in row.turn_ids} == set(owners), (
        "rows hold only policy turns"
    )
    assert not [t for t in log.turns if t.gap], "no turn failed"
    for row in log.sequences:
        assert len(row.completion_ids) == len(row.logprobs) == len(row.env_mask)
        expected_mask: list[int] = []
        for tid in row.turn_ids:
            turn = turns[tid]
            assert turn.completion is not None
            start = turn.prompt_len - len(row.prompt_ids)  # the turn's prompt is the row up to here
            assert start >= len(expected_mask), f"turn {tid} starts inside the previous turn"
            expected_mask += [0] * (start - len(expected_mask))  # what the harness inserted between turns
            ids = list(turn.completion.token_ids)
            assert row.completion_ids[start : start + len(ids)] == ids
            assert row.logprobs[start : start + len(ids)] == list(turn.completion.logprobs)
            expected_mask += [1] * len(ids)
        assert row.env_mask == expected_mask, "env_mask is 1 on the policy's tokens and 0 on the rest"
    assert sum(sum(row.env_mask) for row in log.sequences) == sum(len(t.completion.token_ids) for t in policy)


def check_logprobs_match_a_teacher_forced_recompute(run: LongRun, teacher) -> float:
    worst = 0.0
    for row in run.log.sequences:
        recomputed = teacher_logprobs(teacher, row.prompt_ids, row.completion_ids)
        diffs = [abs(a - b) for a, b, m in zip(row.logprobs, recomputed, row.env_mask, strict=True) if m]
        worst = max(worst, *diffs)
    assert worst < 2e-3, f"sampled logprobs differ from the teacher-forced ones by {worst}"
    return worst


@pytest.mark.parametrize("name", list(LINEAGE))
def test_a_long_episode_trains_every_policy_token_once_exactly(
    name, long_run, teacher, no_leftover_processes
):
    run = long_run(name)
    log, summary = run.log, run.log.summary
    assert summary is not None
    detail = f"{run.stdout}\n" + "\n".join(
        f"{t.index} seq={t.sequence} kind={t.kind} aux={t.aux} prompt={t.prompt_len}" for t in log.turns
    )
    assert [(row.origin, row.parent) for row in log.sequences] == LINEAGE[name], detail
    assert summary.reward == 1.0 and summary.status == "exited", detail
    assert summary.aux_turns == AUX_TURNS.get(name, 0), detail
    check_rows_are_exact(run)
    check_logprobs_match_a_teacher_forced_recompute(run, teacher)
    sampled = sum(len(t.completion.token_ids) for t in log.turns if not t.aux and t.completion)
    assert summary.tokens_trained == summary.tokens_sampled == sampled > 0


def test_claude_code_with_a_compaction_and_a_sub_agent_trains_every_row_in_openenv_run_and_the_viewer(
    long_run, browser, tiny_model
):
    """Issue 19's acceptance: >= 3 sequences, all trained, tokens_trained / tokens_sampled = 1.00, shown by
    `openenv run` (its table and its sequence line) and by the viewer (lineage tree, trained ratio)."""
    from selenium.webdriver.common.by import By

    from openenv.server import LocalServer
    from openenv.viewer import create_viewer_app, tokenizer_decode

    run = long_run("claude-code")
    rows, summary = run.log.sequences, run.log.summary
    assert summary is not None and len(rows) >= 3 and all(sum(row.env_mask) > 0 for row in rows)
    sampled = summary.tokens_sampled
    assert f"{sampled}/{sampled} = 1.00" in run.stdout, run.stdout
    shown = [
        f"{i} {origin}" + (f"<-{parent}" if parent is not None else "") + f" ({len(row.turn_ids)} turns, "
        f"{sum(row.env_mask)} tok)"
        for i, (row, (origin, parent)) in enumerate(zip(rows, LINEAGE["claude-code"], strict=True))
    ]
    assert "sequences: " + " · ".join(shown) in run.stdout, run.stdout
    server = LocalServer(create_viewer_app(lambda: [run.log], tokenizer_decode(tiny_model))).start()
    try:
        browser.get(f"{server.base_url}/?token={server.token}")  # as `openenv view` prints it
        items = browser.find_elements(By.CSS_SELECTOR, "#lineage li")
        assert [(li.get_attribute("data-origin"), li.get_attribute("data-parent")) for li in items] == [
            ("new", ""),
            ("sub-agent", "0"),
            ("compaction", "0"),
            ("compaction", "0"),
        ]
        assert browser.find_element(By.ID, "trained-ratio").text == f"{sampled} / {sampled} = 1.00"
        model = browser.find_elements(By.CSS_SELECTOR, ".tok.model")
        assert len(model) == sampled, "every trained token is shown as a model token"
    finally:
        server.stop()
