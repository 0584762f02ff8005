"""Sessions end to end: the official `openai` SDK as the harness, a controller in this thread.

The tiny random model almost never writes a tool call, so tool turns are answered by the controller
with `complete(text=...)` (scored by the real backend); sampled turns use the real backend. Each
structural test runs over both the vLLM and the local backend.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pytest
from openai import OpenAI

from openenv.capture.canonical import CanonicalRequest, SamplingParams
from openenv.capture.renderer import Renderer
from openenv.capture.server import CaptureServer
from openenv.capture.session import SyncPendingTurn
from openenv.capture.sync_session import SyncCaptureSession
from openenv.errors import BadRequest

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "bash",
            "description": "Run a shell command.",
            "parameters": {
                "type": "object",
                "properties": {"command": {"type": "string"}},
                "required": ["command"],
            },
        },
    }
]
SHORT = SamplingParams(max_tokens=6, temperature=1.0)


def call_text(command: str) -> str:
    """A hermes tool call written exactly as the tiny model's chat template renders one."""
    return f'<tool_call>\n{{"name": "bash", "arguments": {{"command": "{command}"}}}}\n</tool_call>'


def sdk(session: SyncCaptureSession) -> OpenAI:
    return OpenAI(base_url=session.base_url + "/v1", api_key="unused", max_retries=0, timeout=120)


class Harness:
    """Plays the harness: each request runs in a worker thread while the test plays controller."""

    def __init__(self, session: SyncCaptureSession) -> None:
        self.session = session
        self.client = sdk(session)
        self.pool = ThreadPoolExecutor(1)
        self.messages: list[dict[str, Any]] = [
            {"role": "system", "content": "You are a coding agent."},
            {"role": "user", "content": "How many files are there?"},
        ]

    def request(self) -> Future[Any]:
        return self.pool.submit(
            self.client.chat.completions.create, model="tiny", messages=list(self.messages), tools=TOOLS
        )

    def turn(self, answer: Callable[[SyncPendingTurn], object]) -> Any:
        """Send the conversation, let `answer` resolve the parked request, append the reply."""
        reply = self.request()
        pending = self.session.next_pending(timeout=60)
        assert pending is not None, "the harness request never reached the controller"
        answer(pending)
        message = reply.result(120).choices[0].message
        self.messages.append(message.model_dump(exclude_none=True, exclude={"annotations"}))
        return message

    def tool_result(self, call_id: str, content: str) -> None:
        self.messages.append({"role": "tool", "tool_call_id": call_id, "content": content})


def template_dicts(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """SDK-shaped messages as the chat template takes them (arguments as objects)."""
    import json

    out = []
    for m in messages:
        m = dict(m)
        if m.get("tool_calls"):
            m["tool_calls"] = [
                {
                    "type": "function",
                    "function": {
                        "name": c["function"]["name"],
                        "arguments": json.loads(c["function"]["arguments"]),
                    },
                }
                for c in m["tool_calls"]
            ]
        m["content"] = m.get("content") or ""
        out.append(m)
    return out


def render(renderer: Renderer, messages: list[dict[str, Any]], *, generation_prompt: bool) -> str:
    return renderer.render(template_dicts(messages), TOOLS, generation_prompt=generation_prompt)


def test_three_turn_tool_conversation_is_one_sequence(any_proxy: CaptureServer, renderer: Renderer) -> None:
    session = any_proxy.open_session(mode="gated", sampling=SHORT)
    harness = Harness(session)
    prompts: list[str] = []
    completions: list[list[int]] = []

    def answer_with(text: str) -> Callable[[SyncPendingTurn], object]:
        def answer(pending: SyncPendingTurn) -> object:
            prompts.append(render(renderer, harness.messages, generation_prompt=True))
            assert renderer.decode(pending.prompt_ids) == prompts[-1]
            done = pending.complete(text=text)
            completions.append(list(done.token_ids))
            return done

        return answer

    first = harness.turn(answer_with(call_text("ls")))
    assert first.tool_calls[0].function.name == "bash"
    harness.tool_result(first.tool_calls[0].id, "a.txt\nb.txt")
    second = harness.turn(answer_with(call_text("ls | wc -l")))
    harness.tool_result(second.tool_calls[0].id, "2")
    third = harness.turn(answer_with("There are 2 files."))
    assert third.content == "There are 2 files."

    rows, stats = session.sequences(), session.stats()
    assert (len(rows), stats.turns, stats.merge_ratio, stats.breaks) == (1, 3, 1.0, 0)
    row = rows[0]
    whole = renderer.decode(row.prompt_ids + row.completion_ids)
    assert whole + renderer.bridge_text(completions[-1]) == render(
        renderer, harness.messages, generation_prompt=False
    )
    assert len(row.logprobs) == len(row.env_mask) == len(row.completion_ids)

    spans = _spans(row.env_mask, row.completion_ids)
    assert [ids for mask, ids in spans if mask == 1] == completions
    env_texts = [renderer.decode(ids) for mask, ids in spans if mask == 0]
    expected = [prompts[k + 1][len(prompts[k]) + len(renderer.decode(completions[k])) :] for k in range(2)]
    assert env_texts == expected  # env tokens are exactly the template's text between the replies
    assert all(lp == 0.0 for lp, m in zip(row.logprobs, row.env_mask) if m == 0)
    assert all(lp < 0.0 for lp, m in zip(row.logprobs, row.env_mask) if m == 1)


def _spans(mask: list[int], ids: list[int]) -> list[tuple[int, list[int]]]:
    spans: list[tuple[int, list[int]]] = []
    for m, i in zip(mask, ids):
        if spans and spans[-1][0] == m:
            spans[-1][1].append(i)
        else:
            spans.append((m, [i]))
    return spans


def test_sampled_turn_extends_the_sequence_with_the_exact_sampled_ids(
    any_proxy: CaptureServer, renderer: Renderer
) -> None:
    session = any_proxy.open_session(mode="gated", sampling=SHORT)
    harness = Harness(session)
    first = harness.turn(lambda p: p.complete(text=call_text("ls")))
    harness.tool_result(first.tool_calls[0].id, "a.txt")
    sampled: list[Any] = []
    harness.turn(lambda p: sampled.append((p.prompt_ids, p.sample())))
    prompt_ids, done = sampled[0]
    assert renderer.decode(prompt_ids) == render(renderer, harness.messages[:-1], generation_prompt=True)
    row = session.sequences()[0]
    assert row.completion_ids[-len(done.token_ids) :] == list(done.token_ids)
    assert row.prompt_ids + row.completion_ids[: -len(done.token_ids)] == prompt_ids
    assert session.stats().merge_ratio == 1.0


def test_rewritten_history_starts_a_new_sequence_and_counts_a_break(any_proxy: CaptureServer) -> None:
    session = any_proxy.open_session(mode="gated", sampling=SHORT)
    harness = Harness(session)
    first = harness.turn(lambda p: p.complete(text=call_text("ls")))
    harness.tool_result(first.tool_calls[0].id, "a.txt")
    harness.turn(lambda p: p.complete(text=call_text("cat a.txt")))
    # Compaction: the harness replaces the history with a summary and carries on.
    harness.messages = [harness.messages[0], {"role": "user", "content": "Summary: one file, a.txt. Go on."}]
    harness.turn(lambda p: p.complete(text="Done."))
    stats = session.stats()
    assert (stats.turns, stats.sequences, stats.breaks, stats.merged) == (3, 2, 1, 1)
    assert stats.merge_ratio == 0.5
    assert [t.kind for t in session.turns()] == ["new", "merged", "break"]


def test_changed_tools_break_the_sequence(proxy: CaptureServer) -> None:
    session = proxy.open_session(mode="gated", sampling=SHORT)
    harness = Harness(session)
    first = harness.turn(lambda p: p.complete(text=call_text("ls")))
    harness.tool_result(first.tool_calls[0].id, "a.txt")
    TOOLS.append({"type": "function", "function": {"name": "edit", "parameters": {"type": "object"}}})
    try:
        harness.turn(lambda p: p.complete(text="ok"))
    finally:
        TOOLS.pop()
    assert session.stats().breaks == 1


def test_gated_controller_runs_in_another_thread(proxy: CaptureServer) -> None:
    """The controller lives in its own thread, the harness in the test thread (both block)."""
    session = proxy.open_session(mode="gated", sampling=SHORT)
    seen: list[SyncPendingTurn] = []

    def controller() -> None:
        pending = session.next_pending(timeout=60)
        assert pending is not None
        seen.append(pending)
        pending.complete(text="hello from the policy")

    thread = threading.Thread(target=controller)
    thread.start()
    reply = sdk(session).chat.completions.create(model="tiny", messages=[{"role": "user", "content": "hi"}])
    thread.join(60)
    assert reply.choices[0].message.content == "hello from the policy"
    assert seen[0].request.messages[0].text() == "hi" and seen[0].dialect == "openai_chat"
    assert not seen[0].aux


def test_async_controller_on_its_own_event_loop(proxy: CaptureServer) -> None:
    session = proxy.open_session(mode="gated", sampling=SHORT)

    async def controller() -> str:
        pending = await session.session.next_pending(timeout=60)
        assert pending is not None
        done = await pending.sample()
        with pytest.raises(BadRequest, match="already answered"):
            await pending.complete(text="too late")
        return done.id

    with ThreadPoolExecutor(1) as pool:
        reply = pool.submit(
            sdk(session).chat.completions.create, model="tiny", messages=[{"role": "user", "content": "hi"}]
        )
        turn_id = asyncio.run(controller())
        assert reply.result(60).id == f"chatcmpl-{turn_id}"


def test_next_pending_times_out_with_none(proxy: CaptureServer) -> None:
    session = proxy.open_session(mode="gated")
    assert session.next_pending(timeout=0.05) is None


def test_fail_reaches_the_harness_as_an_error(proxy: CaptureServer) -> None:
    import openai

    session = proxy.open_session(mode="gated")
    with ThreadPoolExecutor(1) as pool:
        reply = pool.submit(
            sdk(session).chat.completions.create, model="tiny", messages=[{"role": "user", "content": "hi"}]
        )
        pending = session.next_pending(timeout=60)
        assert pending is not None
        pending.fail("policy crashed")
        with pytest.raises(openai.InternalServerError, match="policy crashed"):
            reply.result(60)
    assert session.stats().gaps == 1


def test_run_switches_a_gated_session_to_auto(proxy: CaptureServer) -> None:
    session = proxy.open_session(mode="gated", sampling=SHORT)
    with ThreadPoolExecutor(1) as pool:
        reply = pool.submit(
            sdk(session).chat.completions.create, model="tiny", messages=[{"role": "user", "content": "hi"}]
        )
        assert session.next_pending(timeout=60) is not None  # parked, nobody answers it ...
        session.run()  # ... until run() samples it and everything after
        reply.result(60)
    sdk(session).chat.completions.create(model="tiny", messages=[{"role": "user", "content": "again"}])
    assert session.stats().turns == 2 and session.mode == "auto"


def _titles(req: CanonicalRequest) -> bool:
    return not req.tools and "title" in req.system_text().lower()


def test_aux_requests_are_answered_without_the_controller_and_kept_out_of_sequences(
    proxy: CaptureServer,
) -> None:
    session = proxy.open_session(mode="gated", sampling=SHORT, aux=_titles)
    reply = sdk(session).chat.completions.create(
        model="tiny",
        messages=[
            {"role": "system", "content": "Generate a title for this conversation."},
            {"role": "user", "content": "fix the bug"},
        ],
    )
    assert reply.choices[0].message is not None
    stats = session.stats()
    assert (stats.aux, stats.turns, stats.sequences) == (1, 0, 0)
    assert session.turns()[0].aux


def test_gate_aux_parks_aux_requests_with_the_flag_set(proxy: CaptureServer) -> None:
    session = proxy.open_session(mode="gated", sampling=SHORT, aux=_titles, gate_aux=True)
    with ThreadPoolExecutor(1) as pool:
        reply = pool.submit(
            sdk(session).chat.completions.create,
            model="tiny",
            messages=[{"role": "system", "content": "Write a title."}, {"role": "user", "content": "x"}],
        )
        pending = session.next_pending(timeout=60)
        assert pending is not None and pending.aux
        pending.complete(text="Bug fix")
        assert reply.result(60).choices[0].message.content == "Bug fix"


def test_complete_takes_exact_token_ids(proxy: CaptureServer, renderer: Renderer) -> None:
    session = proxy.open_session(mode="gated")
    ids = renderer.encode("Exact ids.") + [next(iter(renderer.eos_ids))]
    with ThreadPoolExecutor(1) as pool:
        reply = pool.submit(
            sdk(session).chat.completions.create, model="tiny", messages=[{"role": "user", "content": "hi"}]
        )
        pending = session.next_pending(timeout=60)
        assert pending is not None
        done = pending.complete(token_ids=ids)
        assert reply.result(60).choices[0].message.content == "Exact ids."
    assert list(done.token_ids) == ids and len(done.logprobs) == len(ids)
    with pytest.raises(BadRequest, match="exactly one"):
        pending.complete(text="a", token_ids=[1])


QWEN3_STYLE = (
    "{%- set ns = namespace(last=0) -%}{%- for m in messages %}{%- if m.role == 'user' %}"
    "{%- set ns.last = loop.index0 %}{%- endif %}{%- endfor %}"
    "{%- for m in messages %}<|im_start|>{{ 'user' if m.role == 'tool' else m.role }}\n"
    "{%- if m.role == 'assistant' and m.reasoning_content and loop.index0 > ns.last %}"
    "<think>\n{{ m.reasoning_content }}\n</think>\n\n{%- endif %}{{ m.content }}"
    "{%- for c in m.tool_calls or [] %}<tool_call>\n{{ c.function | tojson }}\n</tool_call>{%- endfor %}"
    "<|im_end|>\n{%- endfor %}{%- if add_generation_prompt %}<|im_start|>assistant\n{%- endif %}"
)


def test_template_that_drops_old_reasoning_breaks_only_when_it_rewrites(
    renderer: Renderer, local_backend: Any
) -> None:
    """Tool loops merge; a new user message makes the template drop earlier <think> blocks, so the
    earlier prompt is no longer a prefix: a new sequence and one break."""
    import copy

    tok = copy.deepcopy(renderer.tokenizer)
    tok.chat_template = QWEN3_STYLE
    qwen3 = Renderer(tok)
    assert not qwen3.append_only
    with CaptureServer(backend=local_backend, renderer=qwen3) as server:
        session = server.open_session(mode="gated", sampling=SHORT)
        harness = Harness(session)
        first = harness.turn(lambda p: p.complete(text="<think>\nplan\n</think>\n\n" + call_text("ls")))
        assert first.model_extra["reasoning_content"] == "plan"
        harness.tool_result(first.tool_calls[0].id, "a.txt")
        harness.turn(lambda p: p.complete(text="<think>\nseen\n</think>\n\nOne file."))
        assert session.stats().merge_ratio == 1.0
        harness.messages.append({"role": "user", "content": "And now?"})
        harness.turn(lambda p: p.complete(text="Done."))
        stats = session.stats()
    assert (stats.turns, stats.sequences, stats.breaks) == (3, 2, 1)


def test_backend_failure_reaches_both_controller_and_harness(renderer: Renderer) -> None:
    import openai

    from openenv.capture.backends import VLLMBackend
    from openenv.core.net import free_port
    from openenv.errors import BackendUnavailable

    backend = VLLMBackend(f"http://127.0.0.1:{free_port()}", model="tiny", context_window=4096)
    with CaptureServer(backend=backend, renderer=renderer) as server:
        session = server.open_session(mode="gated")
        with ThreadPoolExecutor(1) as pool:
            reply = pool.submit(
                sdk(session).chat.completions.create,
                model="tiny",
                messages=[{"role": "user", "content": "hi"}],
            )
            pending = session.next_pending(timeout=60)
            assert pending is not None
            with pytest.raises(BackendUnavailable, match="unreachable"):
                pending.sample(timeout=60)
            with pytest.raises(openai.InternalServerError, match="unreachable"):
                reply.result(60)
        assert session.stats().gaps == 1


def test_a_nudge_ends_the_controllers_wait_or_its_next_one_and_no_request_is_lost(
    local_proxy: CaptureServer,
) -> None:
    """The env nudges its session when the harness exits, so the step waiting for a request returns at
    once instead of at its next poll. A nudge nobody waits for ends the next wait; a parked request
    still comes before it."""
    session = local_proxy.open_session(mode="gated", sampling=SHORT)
    with ThreadPoolExecutor(2) as pool:
        waiting = pool.submit(session.next_pending, None)  # no timeout: only a nudge ends it
        session.nudge()
        assert waiting.result(30) is None
        session.nudge()
        assert pool.submit(session.next_pending, None).result(30) is None
        reply = pool.submit(
            sdk(session).chat.completions.create, model="tiny", messages=[{"role": "user", "content": "hi"}]
        )
        pending = session.next_pending(timeout=60)
        assert pending is not None
        session.nudge()
        pending.complete(text="first")
        assert reply.result(60).choices[0].message.content == "first"
        assert pool.submit(session.next_pending, None).result(30) is None
