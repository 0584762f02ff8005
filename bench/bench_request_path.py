"""The proxy's request path in-process, phase by phase, as conversations grow (no HTTP, no engine).

    .venv/bin/python bench/bench_request_path.py [--turns 1,2,10,30,60] [--sessions 8] [--same]

Each session plays a tool-loop conversation (bench_proxy's bodies: ~650-token tool results, distinct
per session unless `--same`) through the OpenAI chat dialect and a session over an instant engine.
Per turn it times, in thread CPU time: parse (raw body -> wire model), to_canonical, digest (the
route's blake2b of the body, for retries), handle (link, render and tokenize the new part, record)
and reply (wire reply JSON). The `whole-body parse` column validates the same body with pydantic in
one go (the path before `BodyParser`), measured in the same run as the baseline for the parse column.
Two baselines: the 1-turn conversation (no tool result at all) and the 2-turn one, the first whose
turns pay for tokenizing a new tool result (every turn after the first pays that once, whatever the
conversation's length). A flat request path keeps the `vs 2 turns` ratio near 1. Nothing here is
asserted in tests.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_proxy import CALL, InstantBackend, _table, conversation_bodies

PHASES = ("parse", "canonical", "digest", "handle", "reply")


async def play(manager: Any, plays: list[list[bytes]], times: dict[str, float]) -> None:
    from openenv.capture.dialects._shared import parse_body
    from openenv.capture.dialects.openai_chat import convert, protocol

    for bodies in plays:
        session = manager.open(base_url="http://127.0.0.1")
        for body in bodies:
            t0 = time.thread_time()
            req = convert.parse(body, None)  # type: ignore[arg-type]
            t1 = time.thread_time()
            canonical = convert.to_canonical(req)
            t2 = time.thread_time()
            digest = hashlib.blake2b(body, digest_size=16).hexdigest()  # as routes/model.py does
            t3 = time.thread_time()
            done = await session.handle(canonical, convert.NAME, digest=digest)
            t4 = time.thread_time()
            convert.from_canonical(done, req).model_dump_json()
            t5 = time.thread_time()
            parse_body(protocol.ChatCompletionRequest, body)
            t6 = time.thread_time()
            marks = (t0, t1, t2, t3, t4, t5, t6)
            for phase, a, b in zip((*PHASES, "whole"), marks, marks[1:], strict=False):
                times[phase] += b - a
        stats = session.trajectory.stats()
        if stats.sequences != 1:
            raise RuntimeError(f"conversation did not merge: {stats}")
        manager.close(session.token)


def row(renderer: Any, turns: int, sessions: int, same: bool, rounds: int) -> dict[str, float]:
    """Per-turn CPU-ms of each phase: the best of `rounds` rounds (a loaded machine only adds)."""
    from openenv.capture.sessions import SessionManager

    ids = renderer.encode(CALL) + [renderer.tokenizer.eos_token_id]
    manager = SessionManager(renderer=renderer, backend=InstantBackend(ids))
    asyncio.run(play(manager, [conversation_bodies(turns, "warm\n")], dict.fromkeys((*PHASES, "whole"), 0.0)))
    best: dict[str, float] | None = None
    for r in range(rounds):
        plays = [conversation_bodies(turns, "" if same else f"[{turns}.{r}.{i}]\n") for i in range(sessions)]
        times = dict.fromkeys((*PHASES, "whole"), 0.0)
        asyncio.run(play(manager, plays, times))
        per_turn = {k: 1000 * v / (sessions * turns) for k, v in times.items()}
        per_turn["total"] = sum(per_turn[p] for p in PHASES)
        if best is None or per_turn["total"] < best["total"]:
            best = per_turn
    assert best is not None
    return {"turns": turns, **best}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", default="1,2,10,30,60")
    parser.add_argument("--sessions", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--same", action="store_true", help="every session sends the same tool outputs")
    args = parser.parse_args()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from openenv.capture.renderer import Renderer
    from openenv.testing.tiny_model import tiny_model_path

    renderer = Renderer.from_pretrained(tiny_model_path(build=False))
    rows = [row(renderer, int(t), args.sessions, args.same, args.rounds) for t in args.turns.split(",")]
    one = next((r for r in rows if r["turns"] == 1), rows[0])
    two = next((r for r in rows if r["turns"] == 2), one)
    for r in rows:
        r["vs_one"] = r["total"] / one["total"]
        r["vs_two"] = r["total"] / two["total"]
        r["parse_vs_whole"] = r["parse"] / r["whole"]
    shared = "the same tool outputs" if args.same else "distinct tool outputs"
    print(f"\nrequest path: {args.sessions} sessions x best of {args.rounds} rounds ({shared}), CPU-ms per turn, "
          f"baselines = the {one['turns']}-turn and {two['turns']}-turn rows")
    print(_table(rows, [("turns", "turns/conversation", "d"), ("whole", "whole-body parse", ".3f"),
                        ("parse", "parse", ".3f"), ("parse_vs_whole", "vs whole", ".2f"),
                        ("canonical", "to_canonical", ".3f"), ("digest", "digest", ".3f"),
                        ("handle", "handle", ".3f"), ("reply", "reply", ".3f"), ("total", "total", ".3f"),
                        ("vs_one", f"vs {one['turns']} turn", ".2f"),
                        ("vs_two", f"vs {two['turns']} turns", ".2f")]))


if __name__ == "__main__":
    main()
