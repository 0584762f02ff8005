"""Stand-in inference engines for the proxy benchmarks, served over HTTP in vLLM's wire shapes.

    .venv/bin/python bench/engines.py instant --port P
    .venv/bin/python bench/engines.py replay --port P [--vllm-url URL]
    .venv/bin/python bench/engines.py paced --port P [--prefill-tps 20000] [--decode-tps 100]
                                                     [--concurrency 256] [--completion-tokens N]

Both proxies reach them the way they reach vLLM: ours posts token ids to `/v1/completions`
(`return_token_ids`, `logprobs`), the reference posts messages to `/v1/chat/completions` and reads
`prompt_token_ids`, `choices[0].token_ids` and `logprobs.content`. Only the proxy process is measured,
so the engine answers as fast as it can:

- **instant** always samples the same tool call, and scores any forced reply (`prompt_logprobs`, what
  the proxy asks when a controller such as the oracle policy writes the reply) at a constant logprob. A chat prompt is "rendered" by concatenating cached
  per-message ids, with every assistant message rendered as exactly the sampled ids, so a
  conversation's next prompt extends the last prompt + completion token-exactly (the reference's best
  case: every turn links). Its CPU stands in for vLLM's front end: a chat request is also rendered
  with the chat template and tokenized in full, as vLLM's chat endpoint does every request (the
  result is dropped: the cached ids above are what it answers); a token-id request is only parsed.
- **paced** is the instant engine at a realistic speed: a request holds one of `--concurrency` slots
  (vLLM's running batch) for `prompt / prefill_tps + completion / decode_tps` seconds, then answers,
  and reports that engine time in the `x-engine-ms` header. The proxy can then be loaded far past what
  the CPU vLLM serves, and the engine's own cost (its time, its queueing) is known and subtracted from
  what a client sees through the proxy (`bench/bench_sessions.py`). A sleep costs no CPU, so the
  proxy's CPU per turn is measured unpolluted on the same machine.
- **replay** answers each request with the completion the driver queued (`POST /replay/next`), and
  renders chat prompts as vLLM does, by asking a real vLLM's `/tokenize` with the same messages and
  tools (transformers' chat template when no vLLM URL is given). It logs what it saw and sampled
  (`GET /replay/log`) so fidelity is judged from the engine's side.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

CALL = '<tool_call>\n{"name": "tool_0", "arguments": {"command": "cat module.py"}}\n</tool_call>'
LOGPROB = -0.25


async def hold(seconds: float) -> None:
    """Sleep at least `seconds`. uvloop's timers count from the loop's cached millisecond clock, so one
    `asyncio.sleep` can end up to a millisecond early (a stand-in engine then looks faster than it is):
    sleep again until the time has really passed."""
    deadline = time.perf_counter() + seconds
    while (left := deadline - time.perf_counter()) > 0:
        await asyncio.sleep(left)


def _tokenizer() -> Any:
    from transformers import AutoTokenizer

    from openenv.models import tiny_model_path

    return AutoTokenizer.from_pretrained(str(tiny_model_path()))


def _completion_reply(ids: list[int]) -> dict[str, Any]:
    """A `/v1/completions` reply as vLLM gives it with `return_token_ids` and `logprobs=0`."""
    return {
        "id": "cmpl-bench",
        "object": "text_completion",
        "model": "tiny",
        "choices": [
            {
                "index": 0,
                "text": "",
                "token_ids": ids,
                "finish_reason": "stop",
                "logprobs": {"token_logprobs": [LOGPROB] * len(ids), "tokens": [], "top_logprobs": []},
            }
        ],
        "usage": {"prompt_tokens": 0, "completion_tokens": len(ids), "total_tokens": len(ids)},
    }


# A score reply's JSON around its rows: everything but the rows is the same for every prompt.
_SCORE_HEAD = b'{"choices":[{"index":0,"text":"","token_ids":[],"prompt_logprobs":[null'
_SCORE_TAIL = b'],"finish_reason":"length","logprobs":{"token_logprobs":[]}}]}'
_SCORE_ROW = ',{"%d":{"logprob":' + repr(LOGPROB) + "}}"


def _score_reply(prompt: list[int]) -> bytes:
    """A score request's reply (`prompt_logprobs`, teacher-forced, nothing sampled), as vLLM gives it: a
    row per prompt position (`null` first), each `{"<id>": {"logprob": ...}}`, read by position.

    Built as JSON text from one template, not dicts run through `json.dumps`: for a 13k-token prompt
    ~1 ms against ~23 ms. The engine stands in for the model, whose forward pass is not the proxy's
    cost; in an episode bench the old build queued every scoring call behind the last at 4 at once."""
    rows = (_SCORE_ROW * (len(prompt) - 1) % tuple(prompt[1:])).encode() if len(prompt) > 1 else b""
    return _SCORE_HEAD + rows + _SCORE_TAIL


def _chat_reply(prompt_ids: list[int], ids: list[int], message: dict[str, Any]) -> dict[str, Any]:
    """A `/v1/chat/completions` reply as vLLM gives it with `return_token_ids` and `top_logprobs=0`."""
    content = [{"token": f"token_id:{i}", "logprob": LOGPROB, "bytes": None, "top_logprobs": []} for i in ids]
    finish = "tool_calls" if message.get("tool_calls") else "stop"
    return {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": 0,
        "model": "tiny",
        "prompt_token_ids": prompt_ids,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", **message},
                "finish_reason": finish,
                "token_ids": ids,
                "logprobs": {"content": content},
            }
        ],
        "usage": {
            "prompt_tokens": len(prompt_ids),
            "completion_tokens": len(ids),
            "total_tokens": len(prompt_ids) + len(ids),
        },
    }


def _message_for(text: str) -> dict[str, Any]:
    """Content and tool calls of a completion, split by the hermes parser (as vLLM's would)."""
    from openenv.capture.parsers import get_parser

    parsed = get_parser("hermes").parse(text)
    calls = [
        {"id": f"call_{i}", "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
        for i, c in enumerate(parsed.tool_calls)
    ]
    return {"content": parsed.content or None, "tool_calls": calls or None}


@dataclass(frozen=True)
class Encoded:
    """A reply built as JSON text already (`_score_reply`: a row per prompt token, too many to build as
    objects), sent as it is; `engine_ms` is a paced engine's time for it."""

    body: bytes
    engine_ms: float | None = None


class InstantEngine:
    """Samples `CALL` + end-of-turn for every prompt; renders chat prompts from cached message ids."""

    def __init__(self) -> None:
        tok = self.tokenizer = _tokenizer()
        self.completion = tok.encode(CALL, add_special_tokens=False) + [tok.eos_token_id]
        self.message = _message_for(CALL)
        self.start = tok.encode("<|im_start|>assistant\n", add_special_tokens=False)
        self._cache: dict[str, list[int]] = {}

    def _ids(self, key: str, text: str) -> list[int]:
        ids = self._cache.get(key)
        if ids is None:
            ids = self._cache[key] = self.tokenizer.encode(text, add_special_tokens=False)
        return ids

    def chat_prompt(self, body: dict[str, Any]) -> list[int]:
        tools = json.dumps(body.get("tools") or [])
        ids = list(self._ids(tools, f"<|im_start|>system\n# Tools\n{tools}<|im_end|>\n"))
        for message in body["messages"]:
            if message.get("role") == "assistant":
                ids += self.start + self.completion + self._ids("\n", "\n")
                continue
            key = json.dumps(message, sort_keys=True)
            ids += self._ids(key, f"<|im_start|>{message.get('role')}\n{message.get('content')}<|im_end|>\n")
        return ids + self.start

    async def completions(self, body: dict[str, Any]) -> dict[str, Any] | Encoded:
        if body.get("prompt_logprobs") is not None:  # the proxy scoring a forced (oracle) reply
            return Encoded(_score_reply(body["prompt"]))
        return _completion_reply(list(self.completion))

    async def chat(self, body: dict[str, Any]) -> dict[str, Any]:
        self.front_end(body)
        return _chat_reply(self.chat_prompt(body), list(self.completion), self.message)

    def front_end(self, body: dict[str, Any]) -> None:
        """Spend what vLLM's chat endpoint spends before the model runs: render the whole conversation
        with the chat template and tokenize it, every request."""
        self.tokenizer.apply_chat_template(
            body["messages"],
            tools=body.get("tools"),
            add_generation_prompt=True,
            tokenize=True,
            return_dict=False,
        )


class PacedEngine(InstantEngine):
    """The instant engine behind a batch of `concurrency` slots that each hold a request for as long as
    a GPU engine would: prefill at `prefill_tps` prompt tokens/s, decode at `decode_tps` tokens/s."""

    def __init__(
        self, prefill_tps: float, decode_tps: float, concurrency: int, completion_tokens: int | None
    ) -> None:
        super().__init__()
        if completion_tokens:  # pad the tool call out to N tokens with spaces before end-of-turn
            pad = self.tokenizer.encode(" ", add_special_tokens=False)
            body = self.completion[:-1]
            self.completion = (body + pad * max(0, completion_tokens - len(self.completion)))[
                : completion_tokens - 1
            ]
            self.completion.append(self.tokenizer.eos_token_id)
        self.prefill_tps, self.decode_tps = prefill_tps, decode_tps
        self.slots = asyncio.Semaphore(concurrency)

    def seconds(self, prompt_tokens: int, completion_tokens: int) -> float:
        return prompt_tokens / self.prefill_tps + completion_tokens / self.decode_tps

    async def paced(self, prompt_tokens: int, completion_tokens: int) -> float:
        """Wait for a slot and hold it for the request's engine time; returns the ms from arrival
        to answer (queueing included), the engine's whole share of the client's latency."""
        t0 = time.perf_counter()
        async with self.slots:
            await hold(self.seconds(prompt_tokens, completion_tokens))
        return 1000 * (time.perf_counter() - t0)

    async def completions(self, body: dict[str, Any]) -> dict[str, Any] | Encoded:
        prompt = body["prompt"]
        scoring = body.get("prompt_logprobs") is not None
        ms = await self.paced(len(prompt), 0 if scoring else len(self.completion))
        if scoring:
            return Encoded(_score_reply(prompt), engine_ms=ms)
        reply = _completion_reply(list(self.completion))
        reply["engine_ms"] = ms
        return reply

    async def chat(self, body: dict[str, Any]) -> dict[str, Any]:
        prompt = self.chat_prompt(body)  # the cached render only: the sleep stands in for the front end too
        ms = await self.paced(len(prompt), len(self.completion))
        reply = _chat_reply(prompt, list(self.completion), self.message)
        reply["engine_ms"] = ms
        return reply


class ReplayEngine:
    """Answers with queued completions and logs (prompt ids, completion ids) per request."""

    def __init__(self, vllm_url: str | None) -> None:
        import httpx

        self.tokenizer = _tokenizer()
        self.vllm_url = vllm_url
        self.http = httpx.AsyncClient(timeout=120)
        self.queue: list[list[int]] = []
        self.log: list[dict[str, Any]] = []

    def _next(self, prompt_ids: list[int]) -> list[int]:
        ids = self.queue.pop(0) if self.queue else [self.tokenizer.eos_token_id]
        self.log.append({"prompt_ids": prompt_ids, "completion_ids": ids})
        return ids

    async def completions(self, body: dict[str, Any]) -> dict[str, Any] | Encoded:
        prompt = body["prompt"]
        if body.get("prompt_logprobs") is not None:
            return Encoded(_score_reply(prompt))
        return _completion_reply(self._next(list(prompt)))

    async def chat(self, body: dict[str, Any]) -> dict[str, Any]:
        prompt = await self._render(body)
        ids = self._next(prompt)
        text = self.tokenizer.decode([i for i in ids if i != self.tokenizer.eos_token_id])
        return _chat_reply(prompt, ids, _message_for(text))

    async def _render(self, body: dict[str, Any]) -> list[int]:
        """The prompt ids vLLM would build for this chat request."""
        if self.vllm_url is None:
            return list(
                self.tokenizer.apply_chat_template(
                    body["messages"],
                    tools=body.get("tools"),
                    add_generation_prompt=True,
                    tokenize=True,
                    return_dict=False,
                    **(body.get("chat_template_kwargs") or {}),
                )
            )
        request = {"model": "tiny", "messages": body["messages"], "add_generation_prompt": True}
        for key in ("tools", "chat_template_kwargs"):
            if body.get(key):
                request[key] = body[key]
        reply = await self.http.post(f"{self.vllm_url}/tokenize", json=request)
        reply.raise_for_status()
        return list(reply.json()["tokens"])


def _probe_reply(body: dict[str, Any]) -> dict[str, Any] | None:
    """The logprob-mode probe's answer (capture/logprob_mode.py: one token, top-2 logprobs, at T = 1 and 2),
    as a processed engine gives it: two logits 2 and 0 through `log_softmax(z / T)`, so the gap halves at
    T = 2. A stand-in that answered nothing would be `unknown`, and its rows not trainable."""
    if (
        int(body.get("logprobs") or 0) < 2
        or body.get("max_tokens") != 1
        or body.get("prompt_logprobs") is not None
    ):
        return None
    t = float(body.get("temperature") or 1.0)
    first, second = 2.0 / t, 0.0
    norm = math.log(math.exp(first) + math.exp(second))
    top = {"token_id:5": first - norm, "token_id:6": second - norm}
    return {
        "id": "cmpl-probe",
        "object": "text_completion",
        "model": "tiny",
        "choices": [
            {
                "index": 0,
                "text": "",
                "token_ids": [5],
                "finish_reason": "length",
                "logprobs": {
                    "token_logprobs": [first - norm],
                    "tokens": ["token_id:5"],
                    "top_logprobs": [top],
                },
            }
        ],
        "usage": {"prompt_tokens": len(body.get("prompt") or []), "completion_tokens": 1, "total_tokens": 0},
    }


def _answer(reply: dict[str, Any] | Encoded) -> Any:
    """A JSON response; a paced engine's time rides in the `x-engine-ms` header, out of the body."""
    from starlette.responses import JSONResponse, Response

    def timing(ms: float | None) -> dict[str, str] | None:
        return None if ms is None else {"x-engine-ms": f"{ms:.3f}"}

    if isinstance(reply, Encoded):
        return Response(reply.body, media_type="application/json", headers=timing(reply.engine_ms))
    return JSONResponse(reply, headers=timing(reply.pop("engine_ms", None)))


def build_app(engine: InstantEngine | ReplayEngine) -> Any:
    import msgspec
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def models(request: Request) -> JSONResponse:
        return JSONResponse(
            {"object": "list", "data": [{"id": "tiny", "object": "model", "max_model_len": 1 << 20}]}
        )

    async def completions(request: Request) -> JSONResponse:
        body = msgspec.json.decode(await request.body())  # a 13k-id prompt: 0.4 ms against json's 1.0
        probe = _probe_reply(body)
        return _answer(probe if probe is not None else await engine.completions(body))

    async def chat(request: Request) -> JSONResponse:
        return _answer(await engine.chat(await request.json()))

    async def queue(request: Request) -> JSONResponse:
        assert isinstance(engine, ReplayEngine)
        engine.queue.append(list((await request.json())["ids"]))
        return JSONResponse({"queued": len(engine.queue)})

    async def log(request: Request) -> JSONResponse:
        assert isinstance(engine, ReplayEngine)
        entries, engine.log, engine.queue = engine.log, [], []
        return JSONResponse({"log": entries})

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    return Starlette(
        routes=[
            Route("/health", health),
            Route("/v1/models", models),
            Route("/v1/completions", completions, methods=["POST"]),
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/replay/next", queue, methods=["POST"]),
            Route("/replay/log", log, methods=["POST"]),
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=["instant", "paced", "replay"])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--vllm-url")
    parser.add_argument(
        "--prefill-tps",
        type=float,
        default=20000.0,
        help="paced: prompt tokens per second of prefill (default 20000)",
    )
    parser.add_argument(
        "--decode-tps",
        type=float,
        default=100.0,
        help="paced: sampled tokens per second per sequence (default 100)",
    )
    parser.add_argument(
        "--concurrency", type=int, default=256, help="paced: requests served at once (batch slots)"
    )
    parser.add_argument(
        "--completion-tokens", type=int, help="paced: sampled tokens per reply (default: the call's)"
    )
    args = parser.parse_args()
    for name in ("prefill_tps", "decode_tps", "concurrency"):
        if getattr(args, name) <= 0:
            parser.error(f"--{name.replace('_', '-')} must be positive")
    import uvicorn

    engine: InstantEngine | ReplayEngine
    if args.kind == "instant":
        engine = InstantEngine()
    elif args.kind == "paced":
        engine = PacedEngine(args.prefill_tps, args.decode_tps, args.concurrency, args.completion_tokens)
    else:
        engine = ReplayEngine(args.vllm_url)
    uvicorn.run(
        build_app(engine),
        host="127.0.0.1",
        port=args.port,
        log_level="warning",
        access_log=False,
        loop="uvloop",
        http="httptools",
    )


if __name__ == "__main__":
    main()
