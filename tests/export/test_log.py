"""Episode logs: the JSONL of a real pi oracle episode (fixtures/pi-oracle.jsonl) read back into typed records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from openenv.capture.canonical import CanonicalRequest, Message, TextPart
from openenv.errors import BadRequest, NotFound
from openenv.export.log import append_requests, find_logs, read_episode

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
        log.summary.turns, log.summary.sequences, log.summary.merge_ratio)


def test_append_requests_round_trips(tmp_path):
    path = tmp_path / "ep.jsonl"
    path.write_text("")
    req = CanonicalRequest(messages=(Message(role="user", parts=(TextPart(text="hi"),)),))
    append_requests(path, {"t1": req})
    assert read_episode(path).requests == {"t1": req}


def test_a_bad_line_is_an_error_naming_the_file_and_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"type": "summary", "harness": "pi"}) + "\n" + json.dumps({"type": "weird"}) + "\n")
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
