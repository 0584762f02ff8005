"""The proxies the benchmarks load, and the in-process instant engine (bench_proxy, bench_sessions, ...).

- `InstantBackend` answers every prompt at once with the same tool call, inside the proxy's process:
  what is measured is only the proxy (bench_request_path, bench_journal).
- `Target` and its kinds start a proxy and open, address and close a session on it: ours over the
  in-process engine (`python bench/targets.py --serve-instant PORT`), ours as `openenv proxy` in front of
  an HTTP engine, and the reference's capture server from its own venv.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO))

import servers
from conversations import CALL
from servers import REF_VERSION

__all__ = ["TARGETS", "InstantBackend", "OursHTTP", "OursInProcess", "Reference", "Target", "serve_instant"]


# ---- the instant engine ------------------------------------------------------------------------------


class InstantBackend:
    """Answers every prompt at once with the same tool call; the bench measures only the proxy."""

    name = "instant"
    context_window = 1 << 20

    def __init__(self, completion_ids: list[int]) -> None:
        self.ids = completion_ids
        self.logprobs = [-0.25] * len(completion_ids)

    async def generate(self, prompt_ids: list[int], params: Any) -> Any:
        from openenv.capture.backends.base import Generation

        return Generation(list(self.ids), list(self.logprobs), "stop")

    async def ready(self) -> None:
        pass

    async def score(self, prompt_ids: list[int], completion_ids: list[int]) -> list[float]:
        return [-0.25] * len(completion_ids)

    async def aclose(self) -> None:
        return None


def serve_instant(port: int) -> None:
    """The throughput server: our app over `InstantBackend`, uvicorn as `openenv proxy` runs it."""
    import uvicorn

    from openenv.capture.app import create_app
    from openenv.capture.registry import CaptureSessionRegistry
    from openenv.capture.renderer import Renderer
    from openenv.models import tiny_model_path

    renderer = Renderer.from_pretrained(tiny_model_path())
    ids = renderer.encode(CALL) + [renderer.tokenizer.eos_token_id]
    registry = CaptureSessionRegistry(renderer=renderer, backend=InstantBackend(ids))
    uvicorn.run(
        create_app(registry, freeze_gc=True),
        host="127.0.0.1",
        port=port,
        log_level="warning",
        access_log=False,
    )


class Target:
    """A proxy under load: how to start it, and how a conversation opens, addresses and closes a session."""

    name = ""
    calls_engine = True  # calls the instant HTTP engine, whose CPU per turn is then measured too

    def __init__(self, engine_url: str | None = None) -> None:
        self.engine_url = engine_url
        self.server: servers.Spawned | None = None
        self.base = ""

    @property
    def proc(self) -> subprocess.Popen[bytes] | None:
        return None if self.server is None else self.server.proc

    def command(self, port: int) -> list[str]:
        raise NotImplementedError

    def start(self) -> Target:
        self.server = servers.spawn(self.command, self.health)
        self.base = self.server.base
        return self

    health = "/docs"

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None

    async def open(self, http: Any) -> tuple[str, dict[str, str], str]:
        async with http.post(f"{self.base}/sessions", json={}) as r:
            token = (await r.json())["token"]
        return f"{self.base}/s/{token}/v1/chat/completions", {}, token

    async def merged(self, http: Any, token: str) -> bool:
        async with http.get(f"{self.base}/sessions/{token}/sequences") as r:
            stats = (await r.json())["stats"]
        return bool(stats["sequences"] == 1 and stats["merge_ratio"] == 1.0)

    async def close(self, http: Any, token: str) -> None:
        async with http.delete(f"{self.base}/sessions/{token}") as r:
            await r.read()


class OursInProcess(Target):
    """Ours over `InstantBackend` in the same process: no engine round trip at all."""

    name = "ours (in-process engine)"
    calls_engine = False

    def command(self, port: int) -> list[str]:
        return [sys.executable, __file__, "--serve-instant", str(port)]  # this file, run as a script


class OursHTTP(Target):
    """`openenv proxy --backend vllm` in front of the instant HTTP engine (bench/engines.py)."""

    name = "ours"

    def command(self, port: int) -> list[str]:
        # No journal: these rows measure the request path; bench_journal.py measures what it adds per turn.
        return servers.ours_command(str(self.engine_url), port)


class Reference(Target):
    """The reference `CaptureServer` (its own venv) in front of the same instant HTTP engine."""

    name = f"reference {REF_VERSION}"

    def start(self) -> Target:
        self.server = servers.reference(str(self.engine_url), capture_level="tokens")
        self.base = self.server.base
        return self

    async def open(self, http: Any) -> tuple[str, dict[str, str], str]:
        async with http.post(f"{self.base}/sessions", json={}) as r:
            token = str((await r.json())["session_id"])
        return (
            f"{self.base}/v1/chat/completions",
            {"authorization": f"Bearer {token}"},
            token,
        )  # key = session id

    async def merged(self, http: Any, token: str) -> bool:
        async with http.get(f"{self.base}/sessions/{token}/rollout") as r:
            doc = await r.json()
        return bool(doc["stats"]["n_roots"] == 1 and doc["stats"]["n_trainable_sequences"] == 1)


TARGETS = {"ours-inproc": OursInProcess, "ours": OursHTTP, "reference": Reference}


if __name__ == "__main__":
    if sys.argv[1:2] != ["--serve-instant"] or len(sys.argv) != 3:
        raise SystemExit("usage: targets.py --serve-instant PORT")
    serve_instant(int(sys.argv[2]))
