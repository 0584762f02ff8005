"""`VLLMBackend`: token ids to an OpenAI-compatible vLLM server and exact ids and logprobs back.

Generation posts a token-id prompt to `/v1/completions` with `return_token_ids` and `logprobs=0`
(the sampled token's logprob: `log_softmax(logits / temperature)` on a server started with
`--logprobs-mode processed_logprobs`, the raw `log_softmax(logits)` on one left at vLLM's default); scoring
posts prompt + completion with `prompt_logprobs=0` and reads the completion positions (always raw: vLLM's
prompt logprobs never pass through the sampler, in either mode). Which mode the server runs is probed once
(`logprob_mode`). Nothing is detokenized or re-tokenized on the way.

The HTTP client is `EngineHTTP`, a small keep-alive client of our own: on the proxy's hot path (one
engine call per turn) httpx's `AsyncClient` cost 1.9-3.5 CPU-ms per call and aiohttp's 0.4-0.9 for
1k-31k-token prompts (bench/bench_backend_client.py), and that CPU is what bounds a proxy's turns/s per
core. `OPENENV_FAST_PATHS=0` selects httpx instead (`engine_client`, `capture/fast_paths.py`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import msgspec

from openenv.capture.backends.base import Generation, TokenIds
from openenv.capture.backends.engine_http import EngineClient, engine_client
from openenv.capture.canonical import SamplingParams
from openenv.capture.logprob_mode import LogprobMode, verdict_from_gaps
from openenv.errors import BackendUnavailable, BadRequest

__all__ = ["VLLMBackend"]

# Below uvicorn's 5 s keep-alive (vLLM's server), so a pooled connection is rarely one the server just
# closed (when it is, EngineHTTP sends the request again on a new one).
_KEEPALIVE_S = 4.0


@contextmanager
def _unreachable(url: str) -> Iterator[None]:
    """Transport failures (refused, reset, timed out) mean the backend is unavailable: retryable."""
    try:
        yield
    except (TimeoutError, OSError) as exc:  # ConnectTimeout, ReadTimeout, refused, reset, disconnected
        raise _unreachable_error(url, type(exc).__name__, exc) from None


def _unreachable_error(url: str, kind: str, exc: Exception) -> BackendUnavailable:
    return BackendUnavailable(f"the vLLM backend at {url} is unreachable: {kind}: {exc}; retry once it is up")


def _status_error(url: str, status: int, body: bytes) -> BadRequest | BackendUnavailable:
    """4xx from vLLM is the request's fault (`BadRequest`); anything else means the backend is unavailable."""
    detail = _detail(body)
    if 400 <= status < 500:
        return BadRequest(f"the vLLM backend rejected the request: {detail}")
    return BackendUnavailable(f"the vLLM backend at {url} answered {status}: {detail}", status=status)


class _Logprob(msgspec.Struct):
    logprob: float


class _ScoreChoice(msgspec.Struct):
    prompt_logprobs: list[msgspec.Raw]  # left undecoded: only the completion's rows are read


class _ScoreReply(msgspec.Struct):
    choices: list[_ScoreChoice]


_SCORE_REPLY = msgspec.json.Decoder(_ScoreReply)
_ROW = msgspec.json.Decoder(dict[str, _Logprob])


@contextmanager
def _reading(reply: Any) -> Iterator[None]:
    """A reply without the token fields we asked for means a vLLM too old or misconfigured."""
    try:
        yield
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        keys = sorted(reply)[:8] if isinstance(reply, dict) else type(reply).__name__
        raise BackendUnavailable(
            f"the vLLM backend's reply lacks {exc!r}; it needs vLLM >= 0.10 "
            f"(return_token_ids, prompt_logprobs); got keys {keys}"
        ) from None


def _detail(body: bytes) -> str:
    try:
        data = msgspec.json.decode(body)
    except msgspec.DecodeError:
        return body[:300].decode("utf-8", "replace")
    if isinstance(data, dict):
        err = data.get("error", data)
        if isinstance(err, dict):
            return str(err.get("message", err))[:300]
        return str(data.get("message", err))[:300]
    return str(data)[:300]


class VLLMBackend:
    """A vLLM server (base URL without `/v1`).

    Args:
        base_url: e.g. `http://127.0.0.1:8123`.
        model: the served model name; discovered from `/v1/models` when None.
        context_window: the max model length; discovered from `/v1/models` when None.
        timeout: seconds to connect, and seconds without a byte of the reply, per request.
        on_reply: called with every decoded `/v1/completions` reply (tests compare what vLLM sampled
            with what the proxy recorded; an audit log can keep them). A streamed generation is reported
            once, as one reply assembled from its chunks (`token_ids`, `logprobs.token_logprobs`,
            `finish_reason`, and `chunks`, their count).
        on_chunk: called with each chunk of a streamed generation as it arrives.
    """

    name = "vllm"
    score_logprob_mode = "raw"  # prompt logprobs skip the sampler: no temperature, whatever the server's mode

    def __init__(
        self,
        base_url: str,
        *,
        model: str | None = None,
        context_window: int | None = None,
        timeout: float = 600.0,
        on_reply: Callable[[dict[str, Any]], None] | None = None,
        on_chunk: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._model = model
        self._context_window = context_window
        self._timeout = timeout
        self._on_reply = on_reply
        self._on_chunk = on_chunk
        # One client per event loop: connections are bound to the loop they were made on, and the
        # backend is built before the proxy's loop exists (tests also drive it from their own loops).
        self._http: EngineClient | None = None
        self._http_loop: asyncio.AbstractEventLoop | None = None
        self._discovery: asyncio.Future[None] | None = None
        self._mode: asyncio.Future[LogprobMode] | None = None

    @property
    def context_window(self) -> int:
        if self._context_window is None:
            self._discover_blocking()
        assert self._context_window is not None
        return self._context_window

    @property
    def model(self) -> str:
        if self._model is None:
            self._discover_blocking()
        assert self._model is not None
        return self._model

    async def ready(self) -> None:
        """Read the served name and max length once, without blocking the loop; concurrent first turns
        share one lookup. Bounded by the request timeout (at most 10 s), like any other call."""
        if self._model is not None and self._context_window is not None:
            return
        if self._discovery is None or self._discovery.get_loop() is not asyncio.get_running_loop():
            self._discovery = asyncio.ensure_future(self._discover())
        try:
            await asyncio.shield(self._discovery)
        except BackendUnavailable:
            self._discovery = None  # the next turn asks again
            raise

    async def _discover(self) -> None:
        http = self._client()
        with _unreachable(self.base_url):
            status, body = await http.request("GET", "/v1/models", timeout=min(10.0, self._timeout))
        self._learn(status, body)

    def _discover_blocking(self) -> None:
        """For callers outside any loop (a CLI reading `.model`); the proxy awaits `ready()`."""
        import httpx

        try:
            response = httpx.get(f"{self.base_url}/v1/models", timeout=min(10.0, self._timeout))
        except httpx.HTTPError as exc:
            raise _unreachable_error(self.base_url, type(exc).__name__, exc) from None
        self._learn(response.status_code, response.content)

    def _learn(self, status: int, body: bytes) -> None:
        if status != 200:
            raise _status_error(self.base_url, status, body)
        reply = self._decode(body)
        with _reading(reply):
            card = reply["data"][0]
            self._model = self._model or str(card["id"])
            self._context_window = self._context_window or int(card.get("max_model_len") or 32768)

    async def generate(self, prompt_ids: Sequence[int], params: SamplingParams) -> Generation:
        await self.ready()
        reply = await self._post(self._body(prompt_ids, params))
        with _reading(reply):
            choice = reply["choices"][0]
            ids = [int(i) for i in choice["token_ids"]]
            logprobs = [float(x) for x in choice["logprobs"]["token_logprobs"]]
        return Generation(ids, logprobs, "length" if choice.get("finish_reason") == "length" else "stop")

    async def generate_stream(
        self, prompt_ids: Sequence[int], params: SamplingParams, on_tokens: Callable[[list[int]], None]
    ) -> Generation:
        """`generate`, streamed: vLLM's `/v1/completions` with `stream: true` sends each new token's id and
        logprob as it is sampled; `on_tokens(new_ids)` hears of them at once (the proxy streams them on to
        the harness). The result is the same `Generation` as `generate`'s for the same request and seed."""
        await self.ready()
        body = self._body(prompt_ids, params)
        body["stream"] = True
        ids: list[int] = []
        logprobs: list[float] = []
        finish = ["stop"]
        pending = bytearray()
        frames = [0]

        def feed(data: bytes) -> None:
            pending.extend(data)
            while (end := pending.find(b"\n\n")) >= 0:
                frame = bytes(pending[:end])
                del pending[: end + 2]
                frames[0] += 1
                for line in frame.split(b"\n"):
                    if line.startswith(b"data: ") and line[6:].strip() != b"[DONE]":
                        self._chunk(msgspec.json.decode(line[6:]), ids, logprobs, finish, on_tokens)

        http = self._client()
        with _unreachable(self.base_url):
            status, raw = await http.request("POST", "/v1/completions", msgspec.json.encode(body), sink=feed)
        if status != 200:
            raise _status_error(self.base_url, status, raw)
        if not ids and pending.strip():  # a server that ignored `stream` answered with one JSON reply
            reply = self._decode(bytes(pending))
            with _reading(reply):
                choice = reply["choices"][0]
                ids = [int(i) for i in choice["token_ids"]]
                logprobs = [float(x) for x in choice["logprobs"]["token_logprobs"]]
                finish[0] = "length" if choice.get("finish_reason") == "length" else "stop"
            if ids:
                on_tokens(list(ids))
        if not frames[0] and not ids:
            raise BackendUnavailable(
                f"the vLLM backend at {self.base_url} ended its stream without a chunk; retry"
            )
        if len(logprobs) != len(ids):
            raise BackendUnavailable(
                f"the vLLM backend at {self.base_url} streamed {len(ids)} token ids but "
                f"{len(logprobs)} logprobs"
            )
        if self._on_reply is not None:
            self._on_reply(
                {
                    "choices": [
                        {
                            "token_ids": ids,
                            "logprobs": {"token_logprobs": logprobs},
                            "finish_reason": finish[0],
                        }
                    ],
                    "chunks": frames[0],
                }
            )
        return Generation(ids, logprobs, finish[0])

    def _chunk(
        self,
        reply: Any,
        ids: list[int],
        logprobs: list[float],
        finish: list[str],
        on_tokens: Callable[[list[int]], None],
    ) -> None:
        if self._on_chunk is not None:
            self._on_chunk(reply)
        with _reading(reply):
            choice = reply["choices"][0]
            new = [int(i) for i in choice.get("token_ids") or ()]
            lps = choice.get("logprobs") or {}
            logprobs.extend(float(x) for x in lps.get("token_logprobs") or ())
            if choice.get("finish_reason") is not None:
                finish[0] = "length" if choice["finish_reason"] == "length" else "stop"
        if new:
            ids.extend(new)
            on_tokens(new)

    async def logprob_mode(self) -> LogprobMode:
        """What this server's sampled-token logprobs are (`capture/logprob_mode.py`), probed once and cached:
        one 1-token request at `T = 1` and one at `T = 2`, each asking the top-2 logprobs of the next token
        (ids, not text: two tokens may decode alike). A processed server's gap between them halves at
        `T = 2`; a raw one's stays. Concurrent first turns share one probe; a failed probe is retried.

        Raises:
            BackendUnavailable: the server did not answer the probe.
        """
        known = self._mode
        if known is not None and known.done() and not known.cancelled() and known.exception() is None:
            return known.result()  # learned on any loop: the verdict is the server's, not the loop's
        if known is None or known.get_loop() is not asyncio.get_running_loop():
            self._mode = asyncio.ensure_future(self._probe())
        try:
            return await asyncio.shield(self._mode)
        except BackendUnavailable:
            self._mode = None
            raise

    async def _probe(self) -> LogprobMode:
        await self.ready()
        gaps = []
        for temperature in (1.0, 2.0):
            body = {
                "model": self.model,
                "prompt": list(range(1, 9)),
                "max_tokens": 1,
                "temperature": temperature,
                "logprobs": 2,
                "return_tokens_as_token_ids": True,
            }
            try:
                reply = await self._post(body, report=False)
            except BadRequest:  # a server that refuses the probe's fields cannot be told apart: unknown
                return "unknown"
            with _reading(reply):
                top = sorted(
                    (float(v) for v in reply["choices"][0]["logprobs"]["top_logprobs"][0].values()),
                    reverse=True,
                )
            if len(top) < 2 or top[0] > 1e-6:  # logits modes (raw_logits/processed_logits) are no logprobs
                return "raw" if len(top) >= 2 else "unknown"
            gaps.append(top[0] - top[1])
        return verdict_from_gaps(gaps[0], gaps[1])

    async def score(
        self, prompt_ids: Sequence[int], completion_ids: Sequence[int], *, temperature: float | None = None
    ) -> list[float]:
        """Raw teacher-forced logprobs (`score_logprob_mode`): vLLM's prompt logprobs ignore `temperature`."""
        await self.ready()
        body = {
            "model": self.model,
            "prompt": [*prompt_ids, *completion_ids],
            "max_tokens": 1,
            "temperature": 0.0,
            "prompt_logprobs": 0,
        }
        if self._on_reply is not None:  # the caller keeps every reply whole
            reply = await self._post(body)
            with _reading(reply):
                rows = reply["choices"][0]["prompt_logprobs"]
                start = len(prompt_ids)
                return [float(rows[start + i][str(tok)]["logprob"]) for i, tok in enumerate(completion_ids)]
        status, raw = await self._raw_post(body)
        try:
            # vLLM answers a row for every prompt position; only the completion's are read. Decoding all
            # of a 12k-token prompt's rows as dicts was the proxy's largest cost in a codex episode.
            rows = _SCORE_REPLY.decode(raw).choices[0].prompt_logprobs
            start = len(prompt_ids)
            return [
                float(_ROW.decode(rows[start + i])[str(tok)].logprob) for i, tok in enumerate(completion_ids)
            ]
        except (msgspec.DecodeError, KeyError, IndexError, TypeError) as exc:
            reply = self._decode(raw)  # not JSON at all: the same error as any other request
            with _reading(reply):
                raise KeyError(f"prompt_logprobs ({exc})") from None

    async def aclose(self) -> None:
        self._drop_client()

    def close_idle(self) -> None:
        """Close the engine connections no request is using (the proxy calls it once idle); call it on the
        loop the client runs on. The next request opens a new one."""
        if self._http is not None and self._http_loop is asyncio.get_running_loop():
            self._http.close_idle()

    def _client(self) -> EngineClient:
        loop = asyncio.get_running_loop()
        if self._http is None or self._http_loop is not loop:
            self._drop_client()
            self._http_loop = loop
            self._http = engine_client(self.base_url, timeout=self._timeout, keepalive_s=_KEEPALIVE_S)
        return self._http

    def _drop_client(self) -> None:
        """Close the client on the loop its connections belong to (this one, or the one it was made on)."""
        http, loop, self._http = self._http, self._http_loop, None
        if http is None or loop is None or loop.is_closed():
            return
        if loop is asyncio.get_running_loop():
            http.close()
        else:
            loop.call_soon_threadsafe(http.close)

    def _body(self, prompt_ids: Sequence[int], params: SamplingParams) -> dict[str, Any]:
        # A turn that extends a sequence brings its prompt's JSON text: 30k ids need not be encoded again.
        known = prompt_ids.json() if isinstance(prompt_ids, TokenIds) else None
        prompt = msgspec.Raw(known) if known is not None else list(prompt_ids)
        body: dict[str, Any] = {
            "model": self.model,
            "prompt": prompt,
            "logprobs": 0,
            "return_token_ids": True,
            "skip_special_tokens": False,
        }
        fields = params.model_dump(exclude_none=True, exclude={"stop", "json_schema"})
        body.update(fields)
        if params.json_schema is not None:
            body["structured_outputs"] = {"json": params.json_schema}
        if params.stop:
            body["stop"] = list(params.stop)
            body["include_stop_str_in_output"] = True
        return body

    async def _raw_post(self, body: dict[str, Any]) -> tuple[int, bytes]:
        # msgspec, not json.dumps: a 30k-token prompt is 30k ints, 4.7 ms to encode vs 0.3 ms.
        http = self._client()
        with _unreachable(self.base_url):
            status, raw = await http.request("POST", "/v1/completions", msgspec.json.encode(body))
        if status != 200:
            raise _status_error(self.base_url, status, raw)
        return status, raw

    async def _post(self, body: dict[str, Any], *, report: bool = True) -> dict[str, Any]:
        _, raw = await self._raw_post(body)
        reply = self._decode(raw)
        if self._on_reply is not None and report:
            self._on_reply(reply)
        return reply

    def _decode(self, raw: bytes) -> dict[str, Any]:
        try:
            reply = msgspec.json.decode(raw)
        except msgspec.DecodeError:
            reply = None
        if not isinstance(reply, dict):
            raise BackendUnavailable(
                f"the vLLM backend at {self.base_url} answered with a body that is not a "
                f"JSON object: {raw[:200]!r}"
            )
        return reply
