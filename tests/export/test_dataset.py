"""Export to Hugging Face `datasets`: token rows (RL) and messages rows (SFT), written, loaded back, compared."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from datasets import Dataset, load_from_disk
from typer.testing import CliRunner

from openenv.cli.main import app as cli
from openenv.errors import BadRequest
from openenv.export.dataset import export_episodes, messages_rows, token_rows
from openenv.export.log import read_episode

FIXTURE = Path(__file__).parent / "fixtures" / "pi-oracle.jsonl"


def test_token_rows_round_trip_through_save_to_disk_and_parquet_exactly(tmp_path):
    log = read_episode(FIXTURE)
    result = export_episodes([log], tmp_path, shape="tokens")
    assert result.rows == 1
    expected = token_rows([log])
    for loaded in (load_from_disk(str(result.disk_path)), Dataset.from_parquet(str(result.parquet_path))):
        [row] = loaded.to_list()
        assert row["prompt_ids"] == expected[0]["prompt_ids"] == log.sequences[0].prompt_ids
        assert row["completion_ids"] == log.sequences[0].completion_ids
        assert row["env_mask"] == log.sequences[0].env_mask
        assert row["logprobs"] == pytest.approx(log.sequences[0].logprobs, abs=1e-6)  # stored as float32
        assert (row["harness"], row["task"], row["reward"]) == ("pi", "fix-temperature-conversion", 1.0)
    assert set(loaded.column_names) >= {"prompt_ids", "completion_ids", "logprobs", "env_mask"}  # TRL's keys


def test_messages_rows_are_the_last_request_plus_the_reply_in_chat_shape(tmp_path):
    log = read_episode(FIXTURE)
    [row] = messages_rows([log])
    roles = [m["role"] for m in row["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "assistant"]
    call = row["messages"][2]["tool_calls"][0]
    assert call["name"] == "bash" and "units.py" in json.loads(call["arguments"])["command"]
    assert row["messages"][3]["tool_call_id"] == call["id"]
    assert row["messages"][4]["content"] == "I applied the fix and the task is done."
    assert any(json.loads(t)["name"] == "bash" for t in row["tools"])
    result = export_episodes([log], tmp_path, shape="messages")
    assert load_from_disk(str(result.disk_path)).to_list() == [row]
    assert Dataset.from_parquet(str(result.parquet_path)).to_list() == [row]


def test_messages_export_of_a_log_without_requests_says_which_command_writes_them(tmp_path):
    path = tmp_path / "run.jsonl"
    path.write_text(
        "".join(
            line for line in FIXTURE.read_text().splitlines(keepends=True) if '"request"' not in line[:20]
        )
    )
    with pytest.raises(BadRequest, match="openenv eval"):
        messages_rows([read_episode(path)])


def test_cli_exports_both_shapes_from_a_folder(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    shutil.copy(FIXTURE, logs / "a.jsonl")
    shutil.copy(FIXTURE, logs / "b.jsonl")
    out = tmp_path / "ds"
    result = CliRunner().invoke(
        cli, ["export", str(logs), "--out", str(out), "--shape", "tokens", "--shape", "messages"]
    )
    assert result.exit_code == 0, result.output
    assert "tokens: 2 rows from 2 episode(s)" in result.output
    assert "messages: 2 rows from 2 episode(s)" in result.output
    assert load_from_disk(str(out / "tokens"))["episode"] == ["a", "b"]


def test_cli_refuses_an_unknown_shape(tmp_path):
    result = CliRunner().invoke(cli, ["export", str(FIXTURE), "--shape", "pixels"])
    assert result.exit_code == 2 and "--shape is tokens or messages" in result.output


def test_cli_skips_and_lists_bad_logs_instead_of_aborting_the_set(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    shutil.copy(FIXTURE, logs / "a.jsonl")
    text = FIXTURE.read_text()
    (logs / "b.jsonl").write_text(text[: len(text) // 3])  # truncated by a crash mid-write
    (logs / "c.jsonl").write_text("not json\n")
    out = tmp_path / "ds"
    result = CliRunner().invoke(cli, ["export", str(logs), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "tokens: 1 rows from 1 episode(s)" in result.output and "2 bad log(s) skipped" in result.output
    assert "skipped" in result.output and "b.jsonl" in result.output and "c.jsonl" in result.output
    assert load_from_disk(str(out / "tokens"))["episode"] == ["a"]
    strict = CliRunner().invoke(cli, ["export", str(logs), "--out", str(tmp_path / "ds2"), "--strict"])
    assert strict.exit_code == 1 and "--strict" in strict.output and not (tmp_path / "ds2").exists()
