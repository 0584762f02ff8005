"""The journal's cost per turn: journal off, on without fsync, on with fsync, side by side in one run.

    .venv/bin/python bench/bench_journal.py [--sessions 8] [--turns 20] [--rounds 3]

In-process, no HTTP, an instant engine (bench_proxy's `InstantBackend`): each session plays a tool-loop
conversation (bench_proxy's bodies, distinct per session) through the OpenAI chat dialect and
`CaptureSession.handle`, on one event loop, sessions concurrently. The three modes run interleaved, round by
round, on the same bodies, so background load hits all alike. Per turn: process CPU (the fsync pool's
threads included) and wall time. The journal folder is on the real disk (`/var/tmp`), not a
tmpfs, so fsync waits for the device. Nothing here is asserted in tests.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from conversations import CALL, conversation_bodies, fresh
from targets import InstantBackend

MODES = {"off": None, "on, no fsync": False, "on, fsync": True}
FOLDER = Path("/var/tmp") / f"openenv-bench-journal-{os.getpid()}"  # a real disk, not a tmpfs


async def _play(registry: Any, bodies: list[bytes]) -> None:
    from openenv.capture.dialects import ROUTES, RequestContext

    dialect = ROUTES["POST /v1/chat/completions"].dialect
    session = registry.open(base_url="http://bench")
    ctx = RequestContext(path_params={}, query={}, headers={})
    for body in bodies:
        state = registry.dialect_state
        await session.handle(
            dialect.to_canonical(dialect.parse(body, ctx, state), state), dialect.name, digest=None
        )
    registry.close(session.token)


async def _round(
    renderer: Any, backend: Any, fsync: bool | None, conversations: list[list[bytes]]
) -> tuple[float, float]:
    from openenv.capture.registry import CaptureSessionRegistry

    registry = CaptureSessionRegistry(
        renderer=renderer,
        backend=backend,
        journal_dir=FOLDER if fsync is not None else None,
        journal_fsync=bool(fsync),
    )
    cpu, wall = time.process_time(), time.perf_counter()
    await asyncio.gather(*(_play(registry, c) for c in conversations))
    return time.process_time() - cpu, time.perf_counter() - wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=8)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    from openenv.capture.renderer import Renderer
    from openenv.models import tiny_model_path

    renderer = Renderer.from_pretrained(tiny_model_path())
    backend = InstantBackend(renderer.encode(CALL) + [renderer.tokenizer.eos_token_id])
    totals = {m: [0.0, 0.0] for m in MODES}
    turns = 0
    order = list(MODES)
    for k in range(args.rounds + 1):  # round 0 warms up and is not counted
        for mode in order:  # each mode plays text no conversation has sent: no cache favours a mode
            conversations = [
                conversation_bodies(args.turns, start=fresh(args.turns)) for _ in range(args.sessions)
            ]
            shutil.rmtree(FOLDER, ignore_errors=True)
            cpu, wall = asyncio.run(_round(renderer, backend, MODES[mode], conversations))
            if k:
                totals[mode][0] += cpu
                totals[mode][1] += wall
        order = order[1:] + order[:1]  # and each mode goes first in turn
        turns += args.sessions * args.turns if k else 0
    shutil.rmtree(FOLDER, ignore_errors=True)
    base_cpu, base_wall = totals["off"][0] / turns, totals["off"][1] / turns
    rows = []
    for mode, (cpu, wall) in totals.items():
        rows.append(
            [
                mode,
                f"{1000 * cpu / turns:.3f}",
                f"{cpu / turns / base_cpu:.2f}x",
                f"{1000 * (cpu / turns - base_cpu):+.3f}",
                f"{1000 * wall / turns:.3f}",
                f"{1000 * (wall / turns - base_wall):+.3f}",
            ]
        )
    print(
        f"{args.sessions} sessions x {args.turns} turns, {args.rounds} rounds ({turns} turns per mode), "
        f"journal on {FOLDER}"
    )
    print(
        _markdown(
            ["journal", "CPU-ms / turn", "vs off", "CPU-ms added", "wall-ms / turn", "wall-ms added"], rows
        )
    )


def _markdown(head: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


if __name__ == "__main__":
    main()
