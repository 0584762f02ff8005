"""Every tool-call attempt is recorded with its parse status and span: parsed, malformed (closed but
undecodable, kept in the content), missing its closing tag (cut by the end of the turn)."""

from __future__ import annotations

import pytest

from openenv.capture.parsers.hermes import HermesParser
from openenv.capture.parsers.lfm2 import Lfm2Parser
from openenv.capture.parsers.llama3_json import Llama3JsonParser
from openenv.capture.parsers.qwen3_coder import Qwen3CoderParser
from openenv.capture.parsers.spans import token_spans

GOOD_HERMES = '<tool_call>\n{"name": "bash", "arguments": {"command": "ls"}}\n</tool_call>'
BAD_HERMES = '<tool_call>\n{"name": "bash", "arguments": {"command": "ls"\n</tool_call>'
OPEN_HERMES = '<tool_call>\n{"name": "bash", "arguments": {"command": "ls"}}'
CASES = {
    "hermes": (HermesParser(), GOOD_HERMES, BAD_HERMES, OPEN_HERMES),
    "qwen3_coder": (
        Qwen3CoderParser(),
        "<tool_call>\n<function=bash>\n<parameter=command>\nls\n</parameter>\n</function>\n</tool_call>",
        "<tool_call>\nbash ls\n</tool_call>",
        "<tool_call>\n<function=bash>\n<parameter=command>\nls",
    ),
    "lfm2": (
        Lfm2Parser(),
        '<|tool_call_start|>[bash(command="ls")]<|tool_call_end|>',
        '<|tool_call_start|>[bash(command="ls"]<|tool_call_end|>',
        '<|tool_call_start|>[bash(command="ls")]',
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_each_attempt_is_parsed_malformed_or_missing_its_close_with_its_span(name: str):
    parser, good, bad, unclosed = CASES[name]
    text = f"<think>plan</think>First. {good} Then. {bad} Last. {unclosed}"
    parsed = parser.parse(text)
    statuses = [a.status for a in parsed.attempts]
    assert statuses == ["parsed", "malformed", "missing_close"]
    spans = [text[a.start : a.end] for a in parsed.attempts]
    assert spans[0] == good and spans[1] == bad and spans[2].rstrip() == unclosed
    assert [a.calls for a in parsed.attempts] == [1, 0, 1], "an unclosed call that decodes is still a call"
    assert len(parsed.tool_calls) == 2 and bad.strip() in parsed.content


def test_a_clean_turn_has_only_parsed_attempts_and_plain_text_has_none():
    assert [a.status for a in HermesParser().parse(GOOD_HERMES).attempts] == ["parsed"]
    assert HermesParser().parse("No tools needed.").attempts == ()


def test_llama3_records_parsed_calls_and_a_broken_one_where_calls_are_written():
    ok = Llama3JsonParser().parse('{"name": "bash", "parameters": {"command": "ls"}}')
    assert [a.status for a in ok.attempts] == ["parsed"]
    broken = Llama3JsonParser().parse('<|python_tag|>{"name": "bash", "parameters": {"command": ')
    assert [a.status for a in broken.attempts] == ["malformed"] and broken.tool_calls == ()
    assert Llama3JsonParser().parse("Hello {there}").attempts == ()


def test_character_spans_become_the_token_spans_that_wrote_them(renderer):
    text = f"Sure. {BAD_HERMES} ok"
    ids = renderer.encode(text)
    [attempt] = token_spans(HermesParser().parse(renderer.decode(ids)).attempts, ids, renderer.decode)
    assert attempt.status == "malformed"
    covered = renderer.decode(ids[attempt.token_start : attempt.token_end])
    assert BAD_HERMES in covered and len(covered) <= len(BAD_HERMES) + 8
    assert BAD_HERMES not in renderer.decode(ids[attempt.token_start + 1 : attempt.token_end])
    assert BAD_HERMES not in renderer.decode(ids[attempt.token_start : attempt.token_end - 1])


def test_a_turn_records_its_attempts_in_tokens_and_the_session_counts_the_malformed(local_proxy):
    from concurrent.futures import ThreadPoolExecutor

    import openai

    session = local_proxy.open_session(mode="gated")
    client = openai.OpenAI(base_url=session.base_url + "/v1", api_key=session.token, max_retries=0)
    tools = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]
    with ThreadPoolExecutor(1) as pool:
        reply = pool.submit(
            client.chat.completions.create,
            model="tiny",
            tools=tools,
            messages=[{"role": "user", "content": "list files"}],
        )
        pending = session.next_pending(timeout=60)
        assert pending is not None
        done = pending.complete(text=f"{GOOD_HERMES}\n{BAD_HERMES}")
        message = reply.result(60).choices[0].message
    assert [c.function.name for c in message.tool_calls] == ["bash"]
    good, bad = done.call_attempts
    assert (good.status, bad.status) == ("parsed", "malformed")
    assert 0 <= good.token_start < good.token_end <= bad.token_start < bad.token_end <= len(done.token_ids)
    assert session.stats().malformed_tool_calls == 1
    [record] = session.turns()
    assert record.completion is not None and record.completion.call_attempts == done.call_attempts
