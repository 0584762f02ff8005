"""The per-session journal: every turn on disk before its reply, and the sequences rebuilt from it equal
the live ones, token for token and logprob for logprob."""

from __future__ import annotations

import json
from pathlib import Path

import openai
import pytest

from openenv.capture.backends.local import LocalBackend
from openenv.capture.journal import read_journal, rebuild, rebuild_rows
from openenv.capture.renderer import Renderer
from openenv.capture.server import CaptureServer
from openenv.errors import BadRequest

TOOL = {"type": "function", "function": {"name": "run", "parameters": {"type": "object", "properties": {}}}}


def _play(base_url: str, turns: int) -> None:
    """A linear tool-using conversation: each request extends the last reply, so turns merge."""
    client = openai.OpenAI(base_url=base_url + "/v1", api_key="x", max_retries=0, timeout=120)
    messages: list[dict] = [{"role": "user", "content": "list the files"}]
    for k in range(turns):
        reply = client.chat.completions.create(
            model="tiny", messages=messages, tools=[TOOL], max_tokens=6, temperature=1.0
        )
        messages.append({"role": "assistant", "content": reply.choices[0].message.content or ""})
        messages.append({"role": "user", "content": f"output {k}: a.py b.py"})


@pytest.mark.parametrize("fsync", [True, False])
def test_rebuilt_sequences_equal_the_live_ones(
    renderer: Renderer, local_backend: LocalBackend, tmp_path: Path, fsync: bool
) -> None:
    with CaptureServer(
        backend=local_backend, renderer=renderer, journal_dir=tmp_path, journal_fsync=fsync
    ) as proxy:
        session = proxy.open_session(mode="auto")
        _play(session.base_url, 4)
        second = proxy.open_session(mode="auto")  # another session: another file
        _play(second.base_url, 1)
        live, stats = session.sequences(), session.stats()
        assert session.journal is not None and second.journal is not None
        path = session.journal.path
        assert path != second.journal.path and session.token not in path.name  # the token is a secret
        rows, rebuilt_stats, contents = rebuild_rows(path)  # read while the session is open: all 4 are there
    assert stats.turns == 4 and stats.sequences == 1
    assert [r.model_dump() for r in rows] == [r.model_dump() for r in live]
    assert rebuilt_stats == stats
    assert contents.bad_lines == [] and len(contents.turns) == 4
    assert read_journal(path).closed == "shutdown"  # the server's stop closed it with a last line


def test_a_line_cut_short_by_a_kill_is_skipped_and_counted(
    renderer: Renderer, local_backend: LocalBackend, tmp_path: Path
) -> None:
    with CaptureServer(backend=local_backend, renderer=renderer, journal_dir=tmp_path) as proxy:
        session = proxy.open_session(mode="auto")
        _play(session.base_url, 2)
        live = session.sequences()
        path = session.journal.path
    whole = path.read_bytes()
    path.write_bytes(whole + b'{"t":"turn","id":"cut","compl')  # a write the kill interrupted
    trajectory, contents = rebuild(path)
    assert contents.bad_lines == [len(whole.splitlines()) + 1]
    assert [r.model_dump() for r in trajectory.rows()] == [r.model_dump() for r in live]


def test_turn_lines_hold_ids_once_not_the_whole_history(
    renderer: Renderer, local_backend: LocalBackend, tmp_path: Path
) -> None:
    """A merged turn stores only the env ids since the last reply, so the file grows with the session's
    length, not its square; the default output budget is recorded on each turn."""
    with CaptureServer(backend=local_backend, renderer=renderer, journal_dir=tmp_path) as proxy:
        session = proxy.open_session(mode="auto")
        _play(session.base_url, 3)
        path = session.journal.path
        records = session.turns()
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert [x["t"] for x in lines] == ["session", "turn", "turn", "turn", "closed"]
    first, *merged = lines[1:4]
    assert "prompt_ids" in first and "env_ids" not in first
    assert all(x["kind"] == "merged" and "env_ids" in x and "prompt_ids" not in x for x in merged)
    assert [x["max_tokens"] for x in lines[1:4]] == [r.max_tokens for r in records] == [6, 6, 6]


def test_a_file_that_is_not_a_journal_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text('{"hello": 1}\n')
    with pytest.raises(BadRequest, match="not a capture journal"):
        read_journal(path)
