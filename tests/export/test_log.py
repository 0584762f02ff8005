"""Episode logs: the JSONL of a real pi oracle episode (fixtures/pi-oracle.jsonl) read back into typed records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from openenv.capture.canonical import CanonicalRequest, Message, TextPart
from openenv.errors import BadRequest, NotFound
from openenv.export.log import append_requests, find_logs, log_name, read_episode, read_episodes
from openenv.harness.summary import EpisodeSummary

FIXTURE = Path(__file__).parent / "fixtures" / "pi-oracle.jsonl"


def test_reads_turns_sequences_requests_and_summary_of_a_real_episode():
    log = read_episode(FIXTURE)
    assert log.name == "pi-oracle"
    assert [t.kind for t in log.turns] == ["new", "merged"]
    [row] = log.sequences
    assert row.turn_ids == [t.id for t in log.turns]
    assert set(log.requests) == {t.id for t in log.turns}
    assert [m.role for m in log.requests[log.turns[1].id].messages] == ["system", "user", "assistant", "tool"]
    assert log.summary is not None and (log.summary.harness, log.summary.reward) == ("pi", 1.0)


def test_stats_recomputed_from_turns_match_the_summary_written_at_the_end():
    log = read_episode(FIXTURE)
    stats = log.stats()
    assert log.summary is not None
    assert (stats.turns, stats.sequences, stats.merge_ratio) == (
        log.summary.turns,
        log.summary.sequences,
        log.summary.merge_ratio,
    )


def test_the_summary_line_is_the_summary_openenv_run_prints(tmp_path):
    """One type for both: what `save_trajectory` writes reads back equal, private fields included."""
    written = EpisodeSummary(
        harness="pi",
        task="t",
        policy="oracle",
        reward=None,
        reward_status="error",
        no_reward_reason="engine down",
        status="error",
        error="engine down",
        turns=3,
        tool_calls=2,
        sequences=1,
        merge_ratio=1.0,
        aux_turns=0,
        reward_breakdown={},
        wall_s=1.5,
        tokens_sampled=40,
        tokens_trained=40,
    )
    path = tmp_path / "ep.jsonl"
    path.write_text(json.dumps({"type": "summary", **written.model_dump(mode="json")}) + "\n")
    summary = read_episode(path).summary
    assert isinstance(summary, EpisodeSummary) and summary == written and summary.unread == {}


def test_an_old_log_reads_with_defaults_and_a_newer_ones_fields_are_set_aside(tmp_path):
    """The fixture predates reward_status, tokens_* and lineage; a newer writer may add fields."""
    old = read_episode(FIXTURE).summary
    assert old is not None and (old.reward_status, old.tokens_sampled, old.lineage) == ("scored", 0, [])
    [line] = [json.loads(x) for x in FIXTURE.read_text().splitlines() if x.startswith('{"type": "summary"')]
    line |= {"from_the_future": [1, 2]}
    path = tmp_path / "newer.jsonl"
    path.write_text(json.dumps(line) + "\n")
    newer = read_episode(path).summary
    assert newer is not None and newer.unread == {"from_the_future": [1, 2]} and newer.reward == 1.0
    path.write_text(json.dumps({**line, "turns": "many"}) + "\n")
    with pytest.raises(BadRequest, match=r"(?s)newer.jsonl:1: .*turns"):  # a wrong value is still an error
        read_episode(path)


def test_append_requests_round_trips(tmp_path):
    path = tmp_path / "ep.jsonl"
    path.write_text("")
    req = CanonicalRequest(messages=(Message(role="user", parts=(TextPart(text="hi"),)),))
    append_requests(path, {"t1": req})
    assert read_episode(path).requests == {"t1": req}


def test_the_requests_are_written_with_the_episode_in_one_write(tmp_path, monkeypatch):
    """`openenv eval`'s log carries the canonical requests; they used to be appended by reading the log back
    and writing it whole a second time."""
    from openenv import paths
    from openenv.harness import rollout

    class Env:
        def trajectory(self):
            return read_episode(FIXTURE).turns

    writes: list[Path] = []
    real = paths.write_atomic
    monkeypatch.setattr(rollout, "write_atomic", lambda path, data: writes.append(path) or real(path, data))
    log = read_episode(FIXTURE)
    req = CanonicalRequest(messages=(Message(role="user", parts=(TextPart(text="hi"),)),))
    path = rollout.save_trajectory(tmp_path / "ep.jsonl", Env(), log, log.summary, {"t1": req})  # type: ignore[arg-type]
    written = read_episode(path)
    assert written.requests == {"t1": req} and written.turns == log.turns and written.summary == log.summary
    assert writes == [path]


def test_a_bad_line_is_an_error_naming_the_file_and_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(
        json.dumps({"type": "summary", "harness": "pi"}) + "\n" + json.dumps({"type": "weird"}) + "\n"
    )
    with pytest.raises(BadRequest, match=r"bad.jsonl:2: .*unknown line type 'weird'"):
        read_episode(path)


def test_find_logs_expands_folders_and_names_what_is_missing(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.jsonl").write_text("")
    (tmp_path / "y.jsonl").write_text("")
    assert find_logs([tmp_path]) == [tmp_path / "a" / "x.jsonl", tmp_path / "y.jsonl"]
    with pytest.raises(NotFound, match="no such trajectory file or folder"):
        find_logs([tmp_path / "nope"])
    with pytest.raises(NotFound, match="no trajectory .jsonl files found"):
        find_logs([])


def test_read_episodes_skips_and_names_truncated_and_unfinished_logs(tmp_path):
    text = FIXTURE.read_text()
    summary_at = text.index('{"type": "summary"')
    good = tmp_path / "good.jsonl"
    good.write_text(text)
    torn = tmp_path / "torn.jsonl"  # the writer was killed mid-line
    torn.write_text(text[: len(text) // 2])
    unfinished = tmp_path / "unfinished.jsonl"  # killed between lines, before the summary
    unfinished.write_text(text[:summary_at])
    logs, skipped = read_episodes([good, torn, unfinished])
    assert [log.name for log in logs] == ["good"]
    assert {s.path.name: s.reason for s in skipped}.keys() == {"torn.jsonl", "unfinished.jsonl"}
    assert "torn.jsonl:" in next(s.reason for s in skipped if s.path == torn)
    assert "no summary line" in next(s.reason for s in skipped if s.path == unfinished)


def test_a_log_write_that_fails_midway_leaves_the_previous_log_whole(tmp_path):
    """save_trajectory used to open the file with "w" and write line by line: a crash left it truncated."""
    from openenv.harness.rollout import save_trajectory

    class Dying:
        def trajectory(self):
            yield from read_episode(FIXTURE).turns[:1]
            raise OSError("killed mid-write")

    path = tmp_path / "ep.jsonl"
    path.write_text(FIXTURE.read_text())
    log = read_episode(FIXTURE)
    with pytest.raises(OSError, match="killed mid-write"):
        save_trajectory(path, Dying(), log, log.summary)  # type: ignore[arg-type]
    assert path.read_text() == FIXTURE.read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ep.jsonl"]  # and no temp file is left behind


def test_log_names_are_unique_within_a_second_and_refuse_paths():
    names = {log_name("pi", "fix-temperature-conversion") for _ in range(200)}
    assert len(names) == 200
    for harness, task in [("pi", "../../x"), ("../pi", "t"), ("pi", "a/b"), ("pi", ".env")]:
        with pytest.raises(BadRequest):
            log_name(harness, task)


def test_a_call_counts_as_offered_only_when_its_request_offered_that_tool(tmp_path):
    """pi's oracle calls `bash`, one of the tools pi offered; the same call named as claude-code's tool (`Bash`,
    what a small model trained in several harnesses writes) is a call pi rejects."""
    assert read_episode(FIXTURE).offered_calls() == (1, 1)
    foreign = tmp_path / "foreign.jsonl"
    lines = [json.loads(x) for x in FIXTURE.read_text().splitlines() if x.strip()]
    for line in lines:
        for call in (line.get("completion") or {}).get("tool_calls") or []:
            call["name"] = "Bash"
    foreign.write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert read_episode(foreign).offered_calls() == (0, 1)
    # A turn whose request was not logged (an `openenv run` log) is left out of both counts.
    bare = tmp_path / "bare.jsonl"
    bare.write_text("".join(json.dumps(x) + "\n" for x in lines if x["type"] != "request"))
    assert read_episode(bare).offered_calls() == (0, 0)


def test_every_line_written_by_log_line_reads_back_as_the_record_it_was(tmp_path):
    """The fast writer (pydantic's core, not `json.dumps`) loses nothing: every record of a real episode,
    with a logprob of -inf, a NaN merge ratio and non-ASCII text put in, reads back equal, and each line
    holds the JSON values the old `json.dumps(model_dump)` writer gave."""
    from openenv.harness.summary import log_line, request_line

    log = read_episode(FIXTURE)
    assert log.summary is not None and log.turns[0].completion is not None
    turn = log.turns[0].model_copy(
        update={
            "completion": log.turns[0].completion.model_copy(
                update={"logprobs": (float("-inf"), *log.turns[0].completion.logprobs[1:])}
            )
        }
    )
    row = log.sequences[0].model_copy(update={"logprobs": [float("-inf"), *log.sequences[0].logprobs[1:]]})
    turn_id = log.turns[1].id
    request = log.requests[turn_id]
    request = request.model_copy(
        update={"messages": (*request.messages, Message(role="user", parts=(TextPart(text="é ✓ 日本"),)))}
    )
    summary = log.summary.model_copy(update={"reward": float("nan")})
    lines = [
        log_line("turn", turn),
        log_line("sequence", row),
        log_line("summary", summary),
        request_line(turn_id, request),
    ]
    path = tmp_path / "ep.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")

    assert all(line.isascii() for line in lines)  # as `json.dumps` wrote them: any locale reads them
    back = read_episode(path)
    assert back.turns == [turn] and back.sequences == [row] and back.requests == {turn_id: request}
    assert back.summary is not None and back.summary.reward != back.summary.reward  # NaN, not None
    assert back.summary.model_copy(update={"reward": 0.0}) == summary.model_copy(update={"reward": 0.0})
    old = [
        {"type": "turn", **turn.model_dump(mode="json")},
        {"type": "sequence", **row.model_dump(mode="json")},
        {"type": "summary", **summary.model_dump(mode="json")},
        {"type": "request", "turn_id": turn_id, "request": request.model_dump(mode="json")},
    ]
    assert [json.dumps(json.loads(line), sort_keys=True) for line in lines] == [  # text: NaN != NaN
        json.dumps(value, sort_keys=True) for value in old
    ]
