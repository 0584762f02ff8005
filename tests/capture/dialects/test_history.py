"""`HistoryMemo`: a resent history converts only its new items, and to exactly what a fresh
conversion gives, in every dialect (including the state carried between items: tool names, Gemini's
positional call ids, Responses' open assistant turn)."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

from openenv.capture.dialects import ROUTES, Dialect, RequestContext
from openenv.capture.dialects._history import HistoryMemo
from openenv.capture.dialects.state import DialectState

STATE = DialectState()  # what the dialects remember between requests (one per proxy)

CTX = RequestContext(path_params={"model": "tiny"})


# ---- the memo itself ---------------------------------------------------------------------------


def counting_memo() -> tuple[HistoryMemo[int, str], list[str]]:
    """A memo whose fold numbers the items (the state) and logs every item it folds."""
    folded: list[str] = []

    def fold(n: int, item: str) -> tuple[int, list[str]]:
        folded.append(item)
        if item == "bad":
            raise ValueError("bad item")
        return n + 1, [f"{n}:{item}"]

    return HistoryMemo(fold, 0), folded


def test_a_list_that_extends_a_converted_one_folds_only_its_new_items() -> None:
    memo, folded = counting_memo()
    items = [f"m{i}" for i in range(40)]
    first = memo.convert(items[:38])
    folded.clear()
    second = memo.convert(items)
    assert folded == ["m38", "m39"]
    assert second == first + ("38:m38", "39:m39")  # the state carried across the remembered prefix
    assert all(a is b for a, b in zip(first, second, strict=False))


def test_equal_but_different_objects_are_not_taken_for_the_remembered_items() -> None:
    memo, folded = counting_memo()
    items = [f"m{i}" for i in range(5)]
    memo.convert(items)
    folded.clear()
    copies = ["".join(x) for x in items]  # equal strings, other objects
    assert memo.convert(copies) == memo.convert(items)
    assert folded == copies


def test_two_lists_forking_from_one_history_each_convert_correctly_and_continue_their_own() -> None:
    memo, folded = counting_memo()
    base = ["sys", "user"]
    memo.convert(base)
    folded.clear()
    a, b = memo.convert([*base, "a1", "a2"]), memo.convert([*base, "b1"])
    assert (a[2:], b[2:]) == (("2:a1", "3:a2"), ("2:b1",))
    # `a` superseded the shared history (one list kept per conversation), so `b` folded it again, once.
    assert folded == ["a1", "a2", "sys", "user", "b1"]
    folded.clear()
    memo.convert([*base, "a1", "a2", "a3"])
    memo.convert([*base, "b1", "b2"])
    assert folded == ["a3", "b2"]


def test_pending_values_end_the_list_but_are_not_remembered() -> None:
    def fold(open_: tuple[str, ...], item: str) -> tuple[tuple[str, ...], list[str]]:
        if item.startswith("part"):
            return (*open_, item), []
        return (), ([f"turn({'+'.join(open_)})"] if open_ else []) + [item]

    memo: HistoryMemo[tuple[str, ...], str] = HistoryMemo(
        fold, (), finish=lambda s: [f"turn({'+'.join(s)})"] if s else []
    )
    assert memo.convert(["u", "part1", "part2"]) == ("u", "turn(part1+part2)")
    assert memo.convert(["u", "part1", "part2", "r"]) == ("u", "turn(part1+part2)", "r")


def test_a_failing_item_leaves_nothing_remembered() -> None:
    memo, folded = counting_memo()
    items = ["a", "b", "bad"]
    with pytest.raises(ValueError, match="bad item"):
        memo.convert(items)
    folded.clear()
    assert memo.convert(items[:2]) == ("0:a", "1:b")
    assert folded == ["a", "b"]


# ---- every dialect ---------------------------------------------------------------------------------


def chat_bodies(turns: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]
    bodies = []
    for k in range(turns):
        bodies.append({"model": "tiny", "messages": list(messages)})
        call = {"id": f"c{k}", "type": "function", "function": {"name": f"tool{k % 3}", "arguments": "{}"}}
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{k}", "content": f"out {k}"},
        ]  # no name: from the call
    return bodies


def anthropic_bodies(turns: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "U"}]
    bodies = []
    for k in range(turns):
        bodies.append({"model": "tiny", "max_tokens": 8, "system": "S", "messages": list(messages)})
        use = {"type": "tool_use", "id": f"t{k}", "name": f"tool{k % 3}", "input": {}}
        messages += [
            {"role": "assistant", "content": [{"type": "text", "text": "ok"}, use]},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": f"t{k}", "content": f"out {k}"}],
            },
        ]
    return bodies


def responses_bodies(turns: int) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = [
        {"type": "message", "role": "developer", "content": "S"},
        {"type": "message", "role": "user", "content": "U"},
    ]
    bodies = []
    for k in range(turns):
        bodies.append({"model": "tiny", "instructions": "I", "input": list(items)})
        items += [
            {"type": "reasoning", "summary": [{"type": "summary_text", "text": f"think {k}"}]},
            {"type": "function_call", "call_id": f"f{k}", "name": f"tool{k % 3}", "arguments": "{}"},
            {"type": "function_call_output", "call_id": f"f{k}", "output": f"out {k}"},
        ]
    return bodies


def gemini_bodies(turns: int) -> list[dict[str, Any]]:
    contents: list[dict[str, Any]] = [{"role": "user", "parts": [{"text": "U"}]}]
    bodies = []
    for k in range(turns):
        bodies.append({"systemInstruction": {"parts": [{"text": "S"}]}, "contents": list(contents)})
        # id-less calls and responses: the positional call ids carry across turns
        calls = [{"functionCall": {"name": "shell", "args": {"n": k, "i": i}}} for i in range(2)]
        answers = [
            {"functionResponse": {"name": "shell", "response": {"output": f"out {k}.{i}"}}} for i in range(2)
        ]
        contents += [{"role": "model", "parts": calls}, {"role": "user", "parts": answers}]
    return bodies


CONVERSATIONS: dict[str, Callable[[int], list[dict[str, Any]]]] = {
    "openai_chat": chat_bodies,
    "anthropic": anthropic_bodies,
    "openai_responses": responses_bodies,
    "gemini": gemini_bodies,
}


def dialect(name: str) -> Dialect:
    return next(e.dialect for e in ROUTES.values() if e.dialect.name == name)


@pytest.mark.parametrize("name", sorted(CONVERSATIONS))
def test_a_growing_conversation_converts_as_a_fresh_conversion_does(name: str) -> None:
    d = dialect(name)
    before: tuple[Any, ...] = ()
    for body in CONVERSATIONS[name](12):
        req = d.parse(json.dumps(body).encode(), CTX, STATE)
        got = d.to_canonical(req, STATE)
        fresh = d.to_canonical(copy.deepcopy(req), STATE)  # other item objects: converted from scratch
        assert got == fresh
        # The history the previous turn sent is the same objects now (what the session links by).
        assert all(a is b for a, b in zip(before, got.messages, strict=False))
        before = got.messages
    assert len(before) >= 20
