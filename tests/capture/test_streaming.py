"""Real streaming through the proxy: tokens reach the client while vLLM is still sampling, in each dialect's
own events; the recorded tokens equal the non-streamed path's; silence is filled with keep-alives."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import anthropic
import httpx
import pytest

from openenv.capture.backends import VLLMBackend
from openenv.capture.canonical import SamplingParams
from openenv.capture.server import CaptureServer
from openenv.capture.streaming import ReplySoFar

GREEDY = SamplingParams(max_tokens=48, temperature=0.0)
PROMPT = "Write a long story about a robot."
REQUESTS: dict[str, tuple[str, dict[str, Any]]] = {
    "openai_chat": (
        "/v1/chat/completions",
        {"model": "tiny", "messages": [{"role": "user", "content": PROMPT}]},
    ),
    "openai_responses": ("/v1/responses", {"model": "tiny", "input": PROMPT}),
    "anthropic": (
        "/v1/messages",
        {"model": "tiny", "max_tokens": 48, "messages": [{"role": "user", "content": PROMPT}]},
    ),
    "gemini": (
        "/v1beta/models/tiny:streamGenerateContent?alt=sse",
        {"contents": [{"role": "user", "parts": [{"text": PROMPT}]}]},
    ),
}


def _post(session: Any, dialect: str, *, stream: bool, on_line: Any = None) -> list[str]:
    path, body = REQUESTS[dialect]
    if dialect == "gemini" and not stream:
        path = "/v1beta/models/tiny:generateContent"
    body = {**body, "stream": True} if stream and dialect != "gemini" else body
    headers = {"authorization": f"Bearer {session.token}", "x-api-key": session.token}
    lines: list[str] = []
    with httpx.stream("POST", session.base_url + path, json=body, headers=headers, timeout=120) as reply:
        assert reply.status_code == 200, reply.read()
        for line in reply.iter_lines():
            lines.append(line)
            if on_line is not None:
                on_line(line)
    return lines


def _delta_text(dialect: str, line: str) -> str:
    data = json.loads(line[6:])
    if dialect == "openai_chat":
        return str(data["choices"][0]["delta"]["content"])
    if dialect == "openai_responses":
        return str(data["delta"])
    if dialect == "anthropic":
        return str(data["delta"]["text"])
    return str(data["candidates"][0]["content"]["parts"][0]["text"])


def _text_delta(dialect: str, line: str) -> bool:
    if not line.startswith("data: ") or line == "data: [DONE]":
        return False
    data = json.loads(line[6:])
    if dialect == "openai_chat":
        return bool(data["choices"] and data["choices"][0]["delta"].get("content"))
    if dialect == "openai_responses":
        return data["type"] == "response.output_text.delta"
    if dialect == "anthropic":
        return data["type"] == "content_block_delta" and data["delta"]["type"] == "text_delta"
    return bool(data["candidates"][0]["content"]["parts"][0].get("text"))


class GatedEngine:
    """A scripted stand-in for vLLM's streamed `/v1/completions` (same chunk JSON): it sends the first
    `before` tokens, then waits until the test opens `gate`. Real vLLM on 2 loaded cores can finish before
    the proxy relays a byte, which proves nothing either way; the gate makes "text arrived while the engine
    was still generating" a fact, not a race. (Exactness is tested against the real vLLM below.)"""

    def __init__(self, ids: list[int], before: int = 3, *, die_after: int | None = None) -> None:
        import http.server
        import threading

        self.gate = threading.Event()
        self.posts = 0
        self.timed_out = False
        engine = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                body = json.dumps({"data": [{"id": "tiny", "max_model_len": 4096}]}).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self) -> None:
                asked = json.loads(self.rfile.read(int(self.headers["content-length"])))
                engine.posts += 1
                if not asked.get("stream"):  # a non-streamed generation: the whole reply at once
                    body = json.dumps(
                        {
                            "choices": [
                                {
                                    "index": 0,
                                    "token_ids": ids,
                                    "finish_reason": "stop",
                                    "logprobs": {"token_logprobs": [-0.5] * len(ids)},
                                }
                            ]
                        }
                    ).encode()
                    self.send_response(200)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                for i, tok in enumerate(ids):
                    if i == before and not engine.gate.wait(30):
                        engine.timed_out = True  # nobody opened the gate: the test saw nothing early
                    if i == die_after:  # the engine dies mid-stream: the connection drops, no end chunk
                        self.close_connection = True
                        self.connection.shutdown(2)
                        return
                    last = i == len(ids) - 1
                    chunk = {
                        "choices": [
                            {
                                "index": 0,
                                "token_ids": [tok],
                                "finish_reason": "stop" if last else None,
                                "logprobs": {"token_logprobs": [-0.5]},
                            }
                        ]
                    }
                    self._chunk(f"data: {json.dumps(chunk)}\n\n".encode())
                self._chunk(b"data: [DONE]\n\n")
                self._chunk(b"")

            def _chunk(self, data: bytes) -> None:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.gate.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.parametrize("dialect", list(REQUESTS))
def test_text_reaches_the_client_while_the_engine_is_still_generating(renderer, dialect: str, caplog):
    text = "Hello there, this reply is streamed token by token."
    engine = GatedEngine(renderer.encode(text) + [renderer.tokenizer.eos_token_id])
    try:
        with CaptureServer(backend=VLLMBackend(engine.url), renderer=renderer) as proxy:
            session = proxy.open_session(mode="auto")
            early: list[str] = []

            def seen(line: str) -> None:
                if _text_delta(dialect, line) and not engine.gate.is_set():
                    early.append(_delta_text(dialect, line))
                    engine.gate.set()  # only now may the engine finish

            lines = _post(session, dialect, stream=True, on_line=seen)
            [turn] = session.turns()
    finally:
        engine.close()
    assert early and text.startswith(early[0]), "text reached the client before the engine's last token"
    streamed = "".join(_delta_text(dialect, line) for line in lines if _text_delta(dialect, line))
    assert turn.completion is not None and streamed == turn.completion.text == text
    assert not [r for r in caplog.records if "not a prefix" in r.getMessage()]


@pytest.mark.vllm
@pytest.mark.parametrize("dialect", list(REQUESTS))
def test_streamed_tokens_equal_the_non_streamed_ones_byte_for_byte(proxy: CaptureServer, dialect: str):
    recorded = []
    for stream in (False, True):
        session = proxy.open_session(mode="auto", sampling=GREEDY)
        lines = _post(session, dialect, stream=stream)
        [turn] = session.turns()
        assert turn.completion is not None
        recorded.append((turn.completion.token_ids, turn.completion.logprobs, turn.completion.text))
    assert recorded[0][0] == recorded[1][0] and len(recorded[0][0]) == 48
    assert recorded[0][1] == recorded[1][1], "logprobs identical, not just close"
    assert recorded[0][2] == recorded[1][2]
    if dialect != "gemini":
        deltas = [json.loads(line[6:]) for line in lines if _text_delta(dialect, line)]
        assert deltas, "the streamed reply carried its text"


@pytest.mark.parametrize("dialect", list(REQUESTS))
def test_a_silent_turn_is_kept_alive_and_the_stream_still_parses(
    local_proxy: CaptureServer, dialect: str, monkeypatch
):
    """A gated turn waits on its controller; the client gets SSE keep-alives meanwhile, then the reply."""
    monkeypatch.setenv("OPENENV_SSE_KEEPALIVE_S", "0.1")
    session = local_proxy.open_session(mode="gated", sampling=SamplingParams(max_tokens=8, temperature=1.0))
    with ThreadPoolExecutor(1) as pool:
        reply = pool.submit(_post, session, dialect, stream=True)
        pending = session.next_pending(timeout=60)
        assert pending is not None
        import time

        time.sleep(0.5)
        pending.complete(text="All done here.")
        lines = reply.result(60)
    keepalives = [line for line in lines if line == ": keep-alive"]
    assert len(keepalives) >= 1, lines[:5]
    assert lines.index(keepalives[0]) == 0, "the keep-alive came before any event"
    assert any(_text_delta(dialect, line) for line in lines)


def test_the_anthropic_sdk_reads_a_kept_alive_stream(local_proxy: CaptureServer, monkeypatch):
    monkeypatch.setenv("OPENENV_SSE_KEEPALIVE_S", "0.1")
    session = local_proxy.open_session(mode="gated", sampling=SamplingParams(max_tokens=8, temperature=1.0))
    client = anthropic.Anthropic(base_url=session.base_url, api_key=session.token, max_retries=0)

    def ask() -> str:
        with client.messages.stream(
            model="tiny", max_tokens=8, messages=[{"role": "user", "content": "hi"}]
        ) as s:
            return s.get_final_message().content[0].text

    with ThreadPoolExecutor(1) as pool:
        reply = pool.submit(ask)
        pending = session.next_pending(timeout=60)
        assert pending is not None
        import time

        time.sleep(0.4)
        pending.complete(text="Hello there.")
        assert reply.result(60) == "Hello there."


def _feed_each(so_far: ReplySoFar, ids: list[int]) -> list[tuple[str, str]]:
    return [delta for i in ids for delta in so_far.feed([i])]


def test_only_what_no_later_token_can_change_streams(renderer):
    text = ReplySoFar(renderer.decode)
    streamed = _feed_each(
        text, renderer.encode('  Let me look.\n<tool_call>\n{"name": "bash"}\n</tool_call>')
    )
    assert (
        "".join(p for _, p in streamed) == "Let me look."
        and {c for c, _ in streamed} == {"text"}
        and text.frozen
    )
    partial = ReplySoFar(renderer.decode)
    assert partial.feed(renderer.encode("Done <tool_")) == [("text", "Done")], "a possible tag start waits"


def test_text_after_a_special_token_keeps_streaming_and_the_end_of_turn_waits(renderer):
    """The hermes parser keeps `<|im_start|>` mid-reply as content, so the text after it is certain too;
    the end-of-turn token is dropped from the reply's end, so it waits until a token follows it."""
    from openenv.capture.parsers import get_parser

    [eos] = renderer.eos_ids
    ids = renderer.encode("Hi <|im_start|> there") + [eos]
    so_far = ReplySoFar(renderer.decode, eos_ids=renderer.eos_ids)
    streamed = "".join(p for _, p in _feed_each(so_far, ids))
    assert (
        streamed
        == get_parser("hermes").parse(renderer.completion_text(ids)).content
        == "Hi <|im_start|> there"
    )
    mid = ReplySoFar(renderer.decode, eos_ids=renderer.eos_ids)
    assert "".join(p for _, p in _feed_each(mid, [*renderer.encode("Hi"), eos])) == "Hi"
    assert "".join(p for _, p in mid.feed(renderer.encode(" more"))) == renderer.decode([eos]) + " more"
    unknown = ReplySoFar(renderer.decode)  # no end-of-turn ids known: any `<|` stops the content
    assert "".join(p for _, p in _feed_each(unknown, ids)) == "Hi"
    lfm2 = ReplySoFar(renderer.decode, parser="lfm2", eos_ids=renderer.eos_ids)  # its calls open with `<|`
    assert "".join(p for _, p in _feed_each(lfm2, ids)) == "Hi"


def test_reasoning_streams_as_it_comes_when_the_reply_opens_think(renderer):
    so_far = ReplySoFar(renderer.decode)
    ids = renderer.encode("<think>\nFirst I plan.  Then I act.\n</think>\n\nThe answer is 4.")
    deltas = _feed_each(so_far, ids)
    reasoning = [p for c, p in deltas if c == "reasoning"]
    assert len(reasoning) > 2, "several reasoning pieces, not one at the end"
    assert "".join(reasoning) == "First I plan.  Then I act."
    assert "".join(p for c, p in deltas if c == "text") == "The answer is 4."
    assert [c for c, _ in deltas] == sorted(c for c, _ in deltas), "all reasoning before any text"
    cut = ReplySoFar(renderer.decode)
    assert cut.feed(renderer.encode("<think>plan</thi")) == [("reasoning", "plan")], "a possible close waits"


def test_a_template_opened_think_block_goes_out_whole_at_its_close(renderer):
    """The generation prompt opened `<think>`: without a `</think>` the parser calls it all content, so no
    reasoning is certain before the close; then it goes out whole, and the content streams after it."""
    so_far = ReplySoFar(renderer.decode, thinking=True)
    ids = renderer.encode("secret plan</think>Answer here")
    deltas = _feed_each(so_far, ids)
    close = len(renderer.encode("secret plan</think>"))
    assert _feed_each(ReplySoFar(renderer.decode, thinking=True), ids[: close - 1]) == []
    assert deltas[0] == ("reasoning", "secret plan") and "".join(p for c, p in deltas[1:]) == "Answer here"


@pytest.mark.parametrize("dialect", list(REQUESTS))
def test_a_retried_streamed_request_gets_the_first_answers_bytes(renderer, dialect: str):
    """The replay of a streamed reply is cut into the same text deltas as the first answer: a client that
    retries reads the very bytes it lost, not the same text in other chunks (the soak's client_retry)."""
    text = "Hello there, this reply is streamed token by token."
    engine = GatedEngine(renderer.encode(text) + [renderer.tokenizer.eos_token_id], before=10**6)
    path, body = REQUESTS[dialect]
    body = {**body, "stream": True} if dialect != "gemini" else body
    try:
        with CaptureServer(backend=VLLMBackend(engine.url), renderer=renderer) as proxy:
            session = proxy.open_session(mode="auto")
            headers = {"authorization": f"Bearer {session.token}", "x-api-key": session.token}
            first = httpx.post(session.base_url + path, json=body, headers=headers, timeout=60)
            again = httpx.post(
                session.base_url + path,
                json=body,
                timeout=60,
                headers={**headers, "x-stainless-retry-count": "1"},
            )
            turns = session.turns()
    finally:
        engine.close()
    deltas = [line for line in first.text.splitlines() if _text_delta(dialect, line)]
    assert len(deltas) > 1, "the first answer streamed in several pieces"
    assert again.content == first.content
    assert len(turns) == 1, "the retry was replayed, not recorded"


async def test_several_engines_move_a_stream_only_before_its_first_token(renderer):
    """`VLLMEngines` streams through the session's engine. An engine that fails before any token moves the
    stream to another one (the harness sees nothing); one that dies after the harness saw tokens fails the
    turn, since a second engine would sample a different reply under the text already sent."""
    import socket

    from openenv.capture.backends.vllm_engines import VLLMEngines
    from openenv.errors import BackendUnavailable

    ids = renderer.encode("Hello there, streamed through several engines.") + [
        renderer.tokenizer.eos_token_id
    ]
    dying, healthy = GatedEngine(ids, before=10**6, die_after=3), GatedEngine(ids, before=10**6)
    with socket.socket() as probe:  # a port nobody listens on: that engine refuses at once
        probe.bind(("127.0.0.1", 0))
        refused = f"http://127.0.0.1:{probe.getsockname()[1]}"
    mid, early = VLLMEngines([dying.url, healthy.url]), VLLMEngines([refused, healthy.url], model="tiny")
    try:
        got: list[int] = []
        with pytest.raises(BackendUnavailable):
            await mid.bind("a").generate_stream([1, 2, 3], GREEDY, got.extend)
        assert got == ids[:3] and healthy.posts == 0, "no second engine once tokens went out"
        assert mid.loads()[dying.url]["healthy"] is False

        moved: list[int] = []
        pinned = early.bind("b")
        reply = await pinned.generate_stream([1, 2, 3], GREEDY, moved.extend)
        assert moved == reply.token_ids == ids and healthy.posts == 1
        assert pinned.engine is not None and pinned.engine.url == healthy.url
        assert early.loads()[refused]["healthy"] is False
    finally:
        await mid.aclose()
        await early.aclose()
        dying.close()
        healthy.close()


THOUGHT = (
    "<think>\nThe user wants a count. I will look at the listing first, then answer briefly.\n</think>\n\n"
)
ANSWER = "There are two files here."


def _stream_sdk(dialect: str, session: Any, *, stream: bool, on_reasoning: Any) -> Any:
    """Ask through the dialect's official SDK; return the reply as that SDK assembles it (a JSON-able dict)."""
    messages = [{"role": "user", "content": "How many files?"}]
    if dialect == "openai_chat":
        import openai

        client = openai.OpenAI(base_url=session.base_url + "/v1", api_key=session.token, max_retries=0)
        if not stream:
            message = client.chat.completions.create(model="tiny", messages=messages).choices[0].message
            calls = [
                {"id": c.id, "name": c.function.name, "arguments": c.function.arguments}
                for c in message.tool_calls or ()
            ]
            reasoning = (message.model_extra or {}).get("reasoning_content")
            return {"content": message.content, "reasoning_content": reasoning, "tool_calls": calls}
        got: dict[str, Any] = {"content": None, "reasoning_content": "", "tool_calls": []}
        for chunk in client.chat.completions.create(model="tiny", messages=messages, stream=True):
            delta = chunk.choices[0].delta if chunk.choices else None
            piece = (delta.model_extra or {}).get("reasoning_content") if delta is not None else None
            if piece:
                on_reasoning(piece)
                got["reasoning_content"] += piece
            if delta is not None and delta.content:
                got["content"] = (got["content"] or "") + delta.content
            for call in (delta.tool_calls or ()) if delta is not None else ():
                if call.index == len(got["tool_calls"]):
                    got["tool_calls"].append({"id": call.id, "name": call.function.name, "arguments": ""})
                got["tool_calls"][call.index]["arguments"] += call.function.arguments or ""
        return got
    if dialect == "openai_responses":
        import openai

        client = openai.OpenAI(base_url=session.base_url + "/v1", api_key=session.token, max_retries=0)
        if not stream:
            return client.responses.create(model="tiny", input="How many files?").model_dump(
                mode="json", exclude={"created_at"}
            )  # the turn's second
        with client.responses.stream(model="tiny", input="How many files?") as events:
            for event in events:
                if event.type == "response.reasoning_text.delta":
                    on_reasoning(event.delta)
            final = events.get_final_response().model_dump(mode="json", exclude={"created_at"})
            for item in final[
                "output"
            ]:  # a ParsedResponse: `parsed`, `parsed_arguments` are the helper's own
                item.pop("parsed_arguments", None)
                for part in item.get("content") or ():
                    part.pop("parsed", None)
            return final
    if dialect == "anthropic":
        client = anthropic.Anthropic(base_url=session.base_url, api_key=session.token, max_retries=0)
        if not stream:
            return client.messages.create(model="tiny", max_tokens=64, messages=messages).model_dump(
                mode="json"
            )
        with client.messages.stream(model="tiny", max_tokens=64, messages=messages) as events:
            for event in events:
                if event.type == "content_block_delta" and event.delta.type == "thinking_delta":
                    on_reasoning(event.delta.thinking)
            return events.get_final_message().model_dump(mode="json")
    from google import genai
    from google.genai import types as gtypes

    client = genai.Client(
        api_key=session.token,
        http_options=gtypes.HttpOptions(base_url=session.base_url, api_version="v1beta"),
    )
    if not stream:
        reply = client.models.generate_content(model="tiny", contents="How many files?")
        return [p.model_dump(mode="json", exclude_none=True) for p in reply.candidates[0].content.parts]
    parts: list[dict[str, Any]] = []
    for chunk in client.models.generate_content_stream(model="tiny", contents="How many files?"):
        for part in chunk.candidates[0].content.parts or []:
            if part.thought and part.text:
                on_reasoning(part.text)
            if parts and part.text is not None and parts[-1].get("thought") == part.thought:
                parts[-1]["text"] += part.text  # consecutive pieces of one part, as a client joins them
            else:
                parts.append(part.model_dump(mode="json", exclude_none=True))
    return parts


CALLING = (
    'Let me look.\n<tool_call>\n{"name": "bash", "arguments": {"command": "ls -1 | wc -l"}}\n</tool_call>'
)


@pytest.mark.parametrize("reply", ["answer", "tool_call"])
@pytest.mark.parametrize("dialect", list(REQUESTS))
def test_reasoning_streams_while_the_engine_samples_and_assembles_to_the_unstreamed_reply(
    renderer, dialect: str, reply: str, caplog
):
    """Read through the official SDKs: the thinking text reaches the client as reasoning deltas while the
    engine still samples (the gate), and what the SDK assembles from the stream (reasoning, text and a
    tool call) equals the non-streamed reply byte for byte (turn ids aside), with the same recorded tokens."""
    ANSWER = globals()["ANSWER"] if reply == "answer" else CALLING
    ids = renderer.encode(THOUGHT + ANSWER) + [renderer.tokenizer.eos_token_id]
    engine = GatedEngine(ids, before=8)
    try:
        with CaptureServer(backend=VLLMBackend(engine.url), renderer=renderer) as proxy:
            replies, turns = [], []
            for stream in (True, False):
                session = proxy.open_session(mode="auto")
                early: list[str] = []

                def seen(piece: str, early: list[str] = early) -> None:
                    if not engine.gate.is_set():
                        early.append(piece)
                        engine.gate.set()  # only now may the engine finish

                got = _stream_sdk(dialect, session, stream=stream, on_reasoning=seen)
                [turn] = session.turns()
                replies.append(json.dumps(got, sort_keys=True).replace(turn.id, "TURN"))
                turns.append(turn)
                if stream:
                    assert early and not engine.timed_out, (
                        "reasoning reached the client while the engine sampled"
                    )
                    assert "The user wants a count.".startswith(early[0]), early
    finally:
        engine.close()
    assert replies[0] == replies[1]
    assert "The user wants a count." in replies[0]
    if reply == "answer":
        assert ANSWER in replies[0]
    else:
        assert "Let me look." in replies[0] and "wc -l" in replies[0] and "bash" in replies[0]
        assert len(turns[0].completion.tool_calls) == 1
    assert turns[0].completion.token_ids == turns[1].completion.token_ids == tuple(ids)
    assert turns[0].completion.reasoning == turns[1].completion.reasoning != ""
    assert not [r for r in caplog.records if "not a prefix" in r.getMessage() or "template" in r.getMessage()]


def test_a_long_reply_is_decoded_incrementally_and_exactly(renderer):
    """Each token decodes only the newest ids (with a few of context), checked against a full decode every
    few dozen ids: the pieces join to exactly what a whole decode gives, multi-byte characters included."""
    from openenv.capture.parsers import get_parser

    text = "<think>\n" + "Schön — ünïcödé 🙂 and plain words, " * 40 + "\n</think>\n\nDone: 東京 🙂."
    ids = renderer.encode(text)
    calls: list[int] = []

    def counting(part: Any) -> str:
        calls.append(len(part))
        return renderer.decode(part)

    so_far = ReplySoFar(counting)
    deltas = _feed_each(so_far, ids)
    parsed = get_parser("hermes").parse(renderer.decode(ids))
    assert "".join(p for c, p in deltas if c == "reasoning") == parsed.reasoning
    assert "".join(p for c, p in deltas if c == "text") == parsed.content == "Done: 東京 🙂."
    assert not so_far._whole and len(ids) > 300
    assert sum(calls) < len(ids) ** 2 / 8, "not a full decode per token (that is len(ids)**2 / 2 ids)"
