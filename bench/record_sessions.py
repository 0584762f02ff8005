"""Record real multi-turn harness sessions for the fidelity benchmark (bench/sessions/*.jsonl).

    .venv/bin/python bench/record_sessions.py [--harnesses pi,codex,claude-code,gemini-cli,opencode]

Each harness CLI runs one episode of a builtin task through our capture proxy, answered by the oracle
policy (it lists the workspace, runs the reference solution with the harness's own shell tool, then
answers in text), on the in-process tiny model. An ASGI middleware around the proxy writes one line per
model request: the wire route, the raw body, and the turn(s) it produced with their exact completion
ids. `bench_fidelity.py` replays these lines through both proxies. Re-run only to refresh the files:
they are committed so the benchmark needs no harness.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SESSIONS = REPO / "bench" / "sessions"
HARNESSES = ("pi", "codex", "claude-code", "gemini-cli", "opencode")
TASK = "fix-temperature-conversion"


class Recorder:
    """ASGI middleware: per model request, the body in and the turns the session recorded for it."""

    def __init__(self, app: Any, registry: Any, lines: list[dict[str, Any]]) -> None:
        self.app, self.registry, self.lines = app, registry, lines

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or not scope["path"].startswith("/s/"):
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        more = True
        while more:
            message = await receive()
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        before = {token: len(s.trajectory.turns) for token, s in self.registry.sessions.items()}
        status: list[int] = []

        replayed = False

        async def replay_receive() -> dict[str, Any]:
            nonlocal replayed
            if replayed:  # later reads wait for the disconnect, as the server's own receive does
                return await receive()  # type: ignore[no-any-return]
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        async def capture_send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status.append(message["status"])
            await send(message)

        await self.app(scope, replay_receive, capture_send)
        turns = []
        for token, session in self.registry.sessions.items():
            for turn in session.trajectory.turns[before.get(token, 0) :]:
                done = turn.completion
                turns.append(
                    {
                        "aux": turn.aux,
                        "gap": turn.gap,
                        "completion_ids": list(done.token_ids) if done else None,
                    }
                )
        headers = {
            k.decode(): v.decode() for k, v in scope["headers"] if k.decode().startswith(("anthropic-", "x-"))
        }
        route = "/" + scope["path"].split("/", 3)[3]  # drop /s/<token>
        self.lines.append(
            {
                "route": route,
                "query": scope["query_string"].decode(),
                "headers": headers,
                "body": json.loads(body),
                "status": status[0] if status else None,
                "turns": turns,
            }
        )


def record(harness: str, out: Path) -> dict[str, Any]:
    """One oracle episode of `harness`; writes `out` and returns the episode summary."""
    import openenv.capture.server as capture_server
    from openenv.harness.environment import HarnessEnvironment
    from openenv.harness.rollout import run_episode
    from openenv.harness.tasks import find_task

    lines: list[dict[str, Any]] = []
    original = capture_server.create_app

    def recording_app(registry: Any, **kwargs: Any) -> Any:
        return Recorder(original(registry, **kwargs), registry, lines)

    capture_server.create_app = recording_app  # type: ignore[assignment]
    try:
        server = capture_server.CaptureServer(backend=_local_backend(), model=_model()).start()
    finally:
        capture_server.create_app = original  # type: ignore[assignment]
    env = HarnessEnvironment(harness, server=server)
    try:
        _, summary = run_episode(
            env, find_task(TASK, "builtin"), policy="oracle", look_first=True, timeout_s=240
        )
    finally:
        env.close()
        server.stop()
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w") as fh:
        for line in lines:
            fh.write(json.dumps(line, separators=(",", ":")) + "\n")
    return summary.model_dump(mode="json")


def _model() -> Path:
    from openenv.models import tiny_model_path

    return tiny_model_path()


def _local_backend() -> Any:
    from openenv.capture.backends.local import LocalBackend

    return LocalBackend(_model())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--harnesses", default=",".join(HARNESSES))
    args = parser.parse_args()
    for harness in args.harnesses.split(","):
        summary = record(harness, SESSIONS / f"{harness}.jsonl")
        print(
            f"{harness}: reward {summary['reward']} turns {summary['turns']} sequences {summary['sequences']} "
            f"aux {summary['aux_turns']} status {summary['status']}",
            file=sys.stderr,
        )


if __name__ == "__main__":
    main()
