"""The proxy's request path in-process, phase by phase, as conversations grow (no HTTP, no engine).

    .venv/bin/python bench/bench_request_path.py [--turns 1,2,10,30,60] [--sessions 8] [--rounds 5] [--same]

Each session plays a tool-loop conversation (bench_proxy's bodies: ~650-token tool results, distinct
per session unless `--same`) through the OpenAI chat dialect and a session over an instant engine.
Per turn it times, in thread CPU time: parse (raw body -> wire model), to_canonical, digest (the
route's blake2b of the body, for retries), handle (link, render and tokenize the new part, record)
and reply (wire reply JSON). The `whole-body parse` column validates the same body with pydantic in
one go (the path before `BodyParser`), measured in the same run as the baseline for the parse column.

A conversation's first turn (system prompt and task, no tool result) costs less than every later
turn, which pays once for tokenizing its new tool result, so the phases are reported per turn after
the first and compared with the 2-turn conversation's second turn (`vs 2 turns`: flat is 1.00). The
older all-turn average and its ratio to the 1-turn row are kept as the last columns. Nothing here is
asserted in tests.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

import xxhash

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_proxy import _table
from conversations import CALL, conversation_bodies, fresh
from targets import InstantBackend

PHASES = ("parse", "canonical", "digest", "handle", "reply")
KEYS = (*PHASES, "whole")


async def play(
    registry: Any, plays: list[list[bytes]], first: dict[str, float], later: dict[str, float]
) -> None:
    """Play each conversation in its own session; a phase's CPU seconds go to `first` for a
    conversation's first turn (system prompt and task, no tool result) and to `later` for the rest."""
    from openenv.capture.dialects._shared import parse_body
    from openenv.capture.dialects.openai_chat import convert, protocol

    for bodies in plays:
        session = registry.open(base_url="http://127.0.0.1")
        for k, body in enumerate(bodies):
            t0 = time.thread_time()
            req = convert.parse(body, None, registry.dialect_state)  # type: ignore[arg-type]
            t1 = time.thread_time()
            canonical = convert.to_canonical(req, registry.dialect_state)
            t2 = time.thread_time()
            digest = xxhash.xxh3_128_hexdigest(body)  # as routes/model.py does
            t3 = time.thread_time()
            done = await session.handle(canonical, convert.NAME, digest=digest)
            t4 = time.thread_time()
            convert.from_canonical(done, req).model_dump_json()
            t5 = time.thread_time()
            parse_body(protocol.ChatCompletionRequest, body)
            t6 = time.thread_time()
            marks = (t0, t1, t2, t3, t4, t5, t6)
            times = later if k else first
            for key, a, b in zip(KEYS, marks, marks[1:], strict=False):
                times[key] += b - a
        stats = session.trajectory.stats()
        if stats.sequences != 1:
            raise RuntimeError(f"conversation did not merge: {stats}")
        registry.close(session.token)


def measure(
    renderer: Any, turns: int, sessions: int, same: bool, rnd: int, registry: Any
) -> dict[str, float]:
    """CPU-ms of each phase per turn after the first, of the first turn, and of all turns, in one round."""
    plays = [
        conversation_bodies(turns)
        if same
        else conversation_bodies(turns, f"[{turns}.{rnd}.{i}]\n", start=fresh(turns))
        for i in range(sessions)
    ]
    first, later = dict.fromkeys(KEYS, 0.0), dict.fromkeys(KEYS, 0.0)
    asyncio.run(play(registry, plays, first, later))
    n_later = sessions * (turns - 1)
    got = {k: 1000 * v / n_later if n_later else math.nan for k, v in later.items()}
    got["total"] = sum(got[p] for p in PHASES)
    got["first"] = 1000 * sum(first[p] for p in PHASES) / sessions
    got["all"] = 1000 * sum(first[p] + later[p] for p in PHASES) / (sessions * turns)
    return {"turns": turns, **got}


def rows(renderer: Any, lengths: list[int], sessions: int, same: bool, rounds: int) -> list[dict[str, float]]:
    """Each length's best round (a loaded machine only adds). Rounds go over every length in turn, so
    a burst of load on the shared machine lands on one round of each, not on all rounds of one."""
    from openenv.capture.registry import CaptureSessionRegistry

    ids = renderer.encode(CALL) + [renderer.tokenizer.eos_token_id]
    registries = {n: CaptureSessionRegistry(renderer=renderer, backend=InstantBackend(ids)) for n in lengths}
    for n, registry in registries.items():
        asyncio.run(
            play(
                registry,
                [conversation_bodies(n, "warm\n")],
                dict.fromkeys(KEYS, 0.0),
                dict.fromkeys(KEYS, 0.0),
            )
        )
    best: dict[int, dict[str, float]] = {}
    for rnd in range(rounds):
        for n in lengths:
            got = measure(renderer, n, sessions, same, rnd, registries[n])
            if n not in best or got["all"] < best[n]["all"]:
                best[n] = got
    return [best[n] for n in lengths]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", default="1,2,10,30,60")
    parser.add_argument("--sessions", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--same", action="store_true", help="every session sends the same tool outputs")
    args = parser.parse_args()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from openenv.capture.renderer import Renderer
    from openenv.models import tiny_model_path

    renderer = Renderer.from_pretrained(tiny_model_path())
    # As `openenv proxy` does (create_app(freeze_gc=True)): full collections would otherwise re-walk the
    # ~400k start-up objects (torch, transformers) at random turns, ~10% of the CPU and most of the noise.
    gc.collect()
    gc.freeze()
    table_rows = rows(
        renderer, [int(t) for t in args.turns.split(",")], args.sessions, args.same, args.rounds
    )
    one = next((r for r in table_rows if r["turns"] == 1), table_rows[0])
    two = next((r for r in table_rows if r["turns"] == 2), None)
    for r in table_rows:
        r["vs_two"] = r["total"] / two["total"] if two else math.nan
        r["vs_one"] = r["all"] / one["all"]
        r["parse_vs_whole"] = r["parse"] / r["whole"]
    shared = "the same tool outputs" if args.same else "distinct tool outputs"
    print(
        f"\nrequest path: {args.sessions} sessions x best of {args.rounds} rounds ({shared}), CPU-ms per turn.\n"
        "Phases are per turn after the first (each pays for its new tool result once); `vs 2 turns` compares "
        "that with the 2-turn conversation's second turn (flat = 1.00).\n`first turn` is a conversation's "
        "first turn; `all turns` averages every turn (the older metric), `vs 1 turn` compares it with the "
        "1-turn row."
    )
    table = _table(
        table_rows,
        [
            ("turns", "turns/conversation", "d"),
            ("first", "first turn", ".3f"),
            ("whole", "whole-body parse", ".3f"),
            ("parse", "parse", ".3f"),
            ("parse_vs_whole", "vs whole", ".2f"),
            ("canonical", "to_canonical", ".3f"),
            ("digest", "digest", ".3f"),
            ("handle", "handle", ".3f"),
            ("reply", "reply", ".3f"),
            ("total", "total", ".3f"),
            ("vs_two", "vs 2 turns", ".2f"),
            ("all", "all turns", ".3f"),
            ("vs_one", "vs 1 turn", ".2f"),
        ],
    )
    print(table.replace("nan", "  -"))


if __name__ == "__main__":
    main()
