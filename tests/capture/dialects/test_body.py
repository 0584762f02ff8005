"""`BodyParser` and `ItemMemo`: a resent history is validated and converted once, and the fast path
reads every body exactly as whole-body validation does (same models, same errors)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from openai import OpenAI

from openenv.capture.dialects import _shared
from openenv.capture.dialects._body import BodyParser, ItemMemo
from openenv.capture.dialects.anthropic import protocol as anthropic
from openenv.capture.dialects.gemini import protocol as gemini
from openenv.capture.dialects.openai_chat import convert as chat_convert
from openenv.capture.dialects.openai_chat import protocol as chat
from openenv.capture.dialects.openai_responses import protocol as responses
from openenv.capture.dialects.state import DialectState
from openenv.capture.server import CaptureServer
from openenv.errors import BadRequest

STATE = DialectState()  # what the dialects remember between requests (one per proxy)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
MODELS = {
    "anthropic": (anthropic.MessagesRequest, ("messages", "tools")),
    "gemini": (gemini.GenerateContentRequest, ("contents", "tools")),
    "openai_responses": (responses.ResponsesRequest, ("input", "tools")),
}
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "bash",
            "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
        },
    }
]


def chat_body(turns: int, *, edit: str | None = None) -> bytes:
    """An OpenAI chat tool loop after `turns` tool calls; `edit` replaces the first tool result."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Fix the bug."},
    ]
    for k in range(turns):
        call = {
            "id": f"call_{k}",
            "type": "function",
            "function": {"name": "bash", "arguments": '{"command": "ls"}'},
        }
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"call_{k}", "content": edit if edit and k == 0 else f"out {k}"},
        ]
    return json.dumps({"model": "tiny", "messages": messages, "tools": TOOLS, "temperature": 0.5}).encode()


def recorded_bodies() -> list[tuple[str, bytes]]:
    out = []
    for name in MODELS:
        for path in sorted((FIXTURES / name).glob("*.json")):
            out.append((name, json.dumps(json.loads(path.read_text())["body"]).encode()))
    return out


@pytest.mark.parametrize(
    ("dialect", "body"), recorded_bodies(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_recorded_harness_bodies_parse_exactly_as_whole_body_validation(dialect: str, body: bytes) -> None:
    model, lists = MODELS[dialect]
    parser = BodyParser(model, lists=lists)
    first, again = parser.parse(body), parser.parse(body)
    assert first == again == _shared.parse_body(model, body)
    assert first.model_dump() == _shared.parse_body(model, body).model_dump()
    assert parser.misses > 0 and parser.hits == parser.misses  # the second parse validated nothing


def test_a_resent_history_is_served_from_memory_as_the_same_objects() -> None:
    parser = BodyParser(chat.ChatCompletionRequest, lists=("messages", "tools"))
    before = parser.parse(chat_body(3))
    misses = parser.misses
    after = parser.parse(chat_body(4))
    assert parser.misses - misses == 2  # only the new assistant call and tool result
    assert all(a is b for a, b in zip(before.messages, after.messages, strict=False))
    assert after.tools is not None and before.tools is not None and after.tools[0] is before.tools[0]
    assert after == _shared.parse_body(chat.ChatCompletionRequest, chat_body(4))


def test_an_edited_earlier_message_is_validated_anew_and_compares_unequal() -> None:
    parser = BodyParser(chat.ChatCompletionRequest, lists=("messages", "tools"))
    plain, edited = parser.parse(chat_body(3)), parser.parse(chat_body(3, edit="out 0 (trimmed)"))
    assert plain.messages[3] is not edited.messages[3] and plain.messages[3] != edited.messages[3]
    assert plain.messages[2] is edited.messages[2]


def test_history_converts_once_and_to_the_same_canonical_messages() -> None:
    first = chat_convert.to_canonical(chat_convert.parse(chat_body(2), None, STATE), STATE)  # type: ignore[arg-type]
    second = chat_convert.to_canonical(chat_convert.parse(chat_body(3), None, STATE), STATE)  # type: ignore[arg-type]
    assert all(a is b for a, b in zip(first.messages, second.messages[: len(first.messages)], strict=True))
    # The tool result without a name still gets the name of the call it answers.
    assert second.messages[3].parts[0].name == "bash"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"not json",
        b"[1, 2]",
        b'{"model": "tiny"}',
        b'{"messages": []}',
        b'{"messages": [{"role": "user", "content": "hi"}, {"content": "no role"}]}',
        b'{"messages": [{"role": "wizard", "content": "hi"}]}',
        b'{"messages": [{"role": "tool", "content": "x"}]}',
        b'{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 0}',
        b'{"messages": {"role": "user"}}',
        b'{"messages": [{"role": "user", "content": "hi"}], "tools": 3}',
    ],
)
def test_a_bad_body_fails_with_the_same_message_as_whole_body_validation(body: bytes) -> None:
    parser = BodyParser(chat.ChatCompletionRequest, lists=("messages", "tools"))
    with pytest.raises(BadRequest) as expected:
        _shared.parse_body(chat.ChatCompletionRequest, body)
    with pytest.raises(BadRequest) as got:
        parser.parse(body)
    assert (got.value.message, got.value.details) == (expected.value.message, expected.value.details)


def test_a_string_where_a_list_may_stand_is_taken_as_is() -> None:
    parser = BodyParser(responses.ResponsesRequest, lists=("input", "tools"))
    body = b'{"model": "gpt", "input": "Say hi."}'
    assert parser.parse(body) == _shared.parse_body(responses.ResponsesRequest, body)


@pytest.mark.parametrize(
    "body",
    [
        b'{"contents": [{"role": "user", "parts": [{"text": "hi"}]}], "system_instruction": {"parts": [{"text": "S"}]}}',
        b'{"contents": [{"role": "user", "parts": [{"text": "hi"}]}], "systemInstruction": {"parts": [{"text": "S"}]}}',
        b'{"contents": [{"role": "user", "parts": [{"text": "hi"}]}], "vendorExtra": {"a": [1]}, "tools": null}',
        b'{"contents": null}',
    ],
)
def test_field_names_aliases_and_extras_read_as_whole_body_validation_reads_them(body: bytes) -> None:
    parser = BodyParser(gemini.GenerateContentRequest, lists=("contents", "tools"))
    try:
        expected = _shared.parse_body(gemini.GenerateContentRequest, body)
    except BadRequest as exc:
        with pytest.raises(BadRequest) as got:
            parser.parse(body)
        assert got.value.message == exc.message
        return
    got_req = parser.parse(body)
    assert got_req == expected and got_req.model_extra == expected.model_extra


def test_a_full_memory_forgets_the_least_recently_used_items_and_stays_correct() -> None:
    parser = BodyParser(chat.ChatCompletionRequest, lists=("messages", "tools"), size=3, histories=1)
    for turns in (1, 2, 3):
        assert parser.parse(chat_body(turns)) == _shared.parse_body(
            chat.ChatCompletionRequest, chat_body(turns)
        )
    misses = parser.misses
    assert parser.parse(chat_body(1)) == _shared.parse_body(chat.ChatCompletionRequest, chat_body(1))
    assert parser.misses > misses  # its items were forgotten and validated again


def test_a_history_that_extends_a_parsed_one_validates_and_looks_up_only_its_new_items() -> None:
    parser = BodyParser(chat.ChatCompletionRequest, lists=("messages",), histories=4)
    parser.parse(chat_body(30))
    misses, lookups = parser.misses, parser.lookups
    after = parser.parse(chat_body(31))
    # The 62-message prefix is one byte comparison; only the new call and tool result are looked up.
    assert (parser.misses - misses, parser.lookups - lookups) == (2, 2)
    assert after == _shared.parse_body(chat.ChatCompletionRequest, chat_body(31))


def test_a_history_that_differs_inside_the_remembered_prefix_is_not_served_from_it() -> None:
    parser = BodyParser(chat.ChatCompletionRequest, lists=("messages",))
    plain = parser.parse(chat_body(3))
    # Same last items as the remembered list, a different tool result inside it.
    edited = parser.parse(chat_body(3, edit="out 0 (trimmed)"))
    assert edited.messages[3] is not plain.messages[3]
    assert edited == _shared.parse_body(chat.ChatCompletionRequest, chat_body(3, edit="out 0 (trimmed)"))
    assert parser.parse(chat_body(4)).messages[3] is plain.messages[3]  # the plain history still extends


def test_a_request_owns_its_lists_so_changing_one_leaves_later_parses_intact() -> None:
    parser = BodyParser(chat.ChatCompletionRequest, lists=("messages", "tools"))
    first = parser.parse(chat_body(3))
    first.messages.clear()
    assert (
        parser.parse(chat_body(3))
        == parser.parse(chat_body(3))
        == _shared.parse_body(chat.ChatCompletionRequest, chat_body(3))
    )


def test_two_conversations_forking_from_one_history_each_keep_their_own_items() -> None:
    parser = BodyParser(chat.ChatCompletionRequest, lists=("messages",))
    base = json.loads(chat_body(2))
    bodies = []
    for branch in ("a", "b"):
        call = {"id": "call_x", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
        messages = [
            *base["messages"],
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_x", "content": f"branch {branch}"},
        ]
        bodies.append(json.dumps({**base, "messages": messages}).encode())
    parser.parse(chat_body(2))
    a, b, a_again = (parser.parse(body) for body in (*bodies, bodies[0]))
    assert [m.content for m in (a.messages[-1], b.messages[-1])] == ["branch a", "branch b"]  # type: ignore[union-attr]
    assert a_again == a and all(x is y for x, y in zip(a.messages, a_again.messages, strict=True))


def test_item_memo_makes_each_value_once_per_item_and_extra() -> None:
    memo: ItemMemo[str] = ItemMemo(size=2)
    made: list[str] = []

    def make(tag: str) -> str:
        made.append(tag)
        return tag

    a, b = object(), object()
    assert memo.get(a, lambda: make("a")) == memo.get(a, lambda: make("again")) == "a"
    assert memo.get(a, lambda: make("a2"), extra="x") == "a2"
    assert memo.get(b, lambda: make("b")) == "b"
    assert made == ["a", "a2", "b"]


def test_a_harness_that_edits_an_earlier_tool_result_does_not_merge(proxy: CaptureServer) -> None:
    """The memory makes unchanged history cheap; it must not hide a change: the proxy compares the
    edited history with the recorded one and starts a new sequence."""
    session = proxy.open_session(mode="auto")
    client = OpenAI(base_url=session.base_url + "/v1", api_key="unused", max_retries=0, timeout=120)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Fix the bug."},
    ]
    for k in range(3):
        reply = client.chat.completions.create(model="tiny", messages=messages, tools=TOOLS, max_tokens=4)  # type: ignore[arg-type]
        messages += [
            reply.choices[0].message.model_dump(exclude_none=True),
            {"role": "user", "content": f"result {k}"},
        ]
    edited = copy.deepcopy(messages)
    edited[3]["content"] = "result 0, trimmed by the harness"
    client.chat.completions.create(model="tiny", messages=edited, tools=TOOLS, max_tokens=4)  # type: ignore[arg-type]
    # The edited request still extends the first turn (its history up to the first reply is intact),
    # so it forks a new sequence from there instead of merging into the head.
    turns = session.turns()
    assert [t.kind for t in turns] == ["new", "merged", "merged", "fork"]
    assert turns[3].parent == turns[0].id
    assert session.stats().sequences == 2
    # An edit before the first reply leaves no turn to extend: a break.
    edited[1]["content"] = "Fix the bug, and be quick."
    client.chat.completions.create(model="tiny", messages=edited, tools=TOOLS, max_tokens=4)  # type: ignore[arg-type]
    assert session.turns()[4].kind == "break"
    assert (session.stats().sequences, session.stats().breaks) == (3, 1)


def test_a_resent_claude_code_history_converts_to_the_same_canonical_messages() -> None:
    from openenv.capture.dialects.anthropic import convert

    body = json.dumps(
        json.loads((FIXTURES / "anthropic" / "claude_code_after_tool.json").read_text())["body"]
    ).encode()
    first = convert.to_canonical(convert.parse(body, None, STATE), STATE)  # type: ignore[arg-type]
    again = convert.to_canonical(convert.parse(body, None, STATE), STATE)  # type: ignore[arg-type]
    fresh = convert.to_canonical(_shared.parse_body(anthropic.MessagesRequest, body), STATE)
    assert all(a is b for a, b in zip(first.messages, again.messages, strict=True))
    assert first == fresh
    assert any(m.role == "tool" and m.parts[0].name for m in first.messages)  # type: ignore[union-attr]
