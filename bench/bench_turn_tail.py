"""The proxy's slowest turns, in-process: CPU per turn at p50-p99, and what the slowest ones have in common.

    .venv/bin/python bench/bench_turn_tail.py [--sessions 400] [--turns 4] [--tool-chars 6000] [--rounds 2]

Each session plays a tool-loop conversation (bench/conversations.py: every tool result a fresh block of the
stdlib's sources, so ~6% of them hold a non-ASCII character) through the OpenAI chat dialect and a session
over an instant engine, as bench_request_path does, and each turn's thread CPU time is taken from the
raw body to the reply's JSON. Two encoders alternate, round by round, on one renderer:

- **word path for all text** (`WordEncoder` as shipped: non-ASCII text is cut by words once every
  character in it is read alike by both regex engines);
- **ASCII only** (the baseline: any text with a non-ASCII character goes to the Rust tokenizer whole, as
  before that change).

Reported per encoder: CPU-ms per turn at p50, p90, p95, p99 and the maximum, and how many of the slowest
2% of turns carried non-ASCII text (against their share of all turns). Nothing here is asserted in tests.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import xxhash

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_proxy import _table
from bench_sessions import percentile
from conversations import CALL, conversation_bodies, fresh
from targets import InstantBackend

ENCODERS = ("word path for all text", "ASCII only")


async def play(registry: Any, plays: list[list[bytes]]) -> list[tuple[float, bool]]:
    """(CPU-ms, whether its new text was ASCII) for every turn of every conversation."""
    from openenv.capture.dialects.openai_chat import convert

    out: list[tuple[float, bool]] = []
    for bodies in plays:
        session = registry.open(base_url="http://127.0.0.1")
        for body in bodies:
            t0 = time.thread_time()
            req = convert.parse(body, None, registry.dialect_state)  # type: ignore[arg-type]
            canonical = convert.to_canonical(req, registry.dialect_state)
            digest = xxhash.xxh3_128_hexdigest(body)
            done = await session.handle(canonical, convert.NAME, digest=digest)
            convert.from_canonical(done, req).model_dump_json()
            ms = 1000 * (time.thread_time() - t0)
            out.append((ms, str(json.loads(body)["messages"][-1]["content"]).isascii()))
        registry.close(session.token)
    return out


def summary(name: str, turns: list[tuple[float, bool]]) -> dict[str, Any]:
    times = [ms for ms, _ in turns]
    slowest = sorted(turns, reverse=True)[: max(1, len(turns) // 50)]
    return {
        "encoder": name,
        "turns": len(turns),
        **{f"p{p}": percentile(times, p) for p in (50, 90, 95, 99)},
        "max": max(times),
        "non_ascii_share": sum(not ascii_ for _, ascii_ in turns) / len(turns),
        "non_ascii_in_slowest": sum(not ascii_ for _, ascii_ in slowest) / len(slowest),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=400)
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--tool-chars", type=int, default=6000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", type=Path, help="also write the rows as JSON here")
    args = parser.parse_args()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from openenv.capture.registry import CaptureSessionRegistry
    from openenv.capture.renderer import Renderer
    from openenv.models import tiny_model_path

    renderer = Renderer.from_pretrained(tiny_model_path())
    words = renderer._words
    if words is None or words._unicode is None:
        raise SystemExit("this tokenizer gets no word encoder for non-ASCII text: nothing to compare")
    unicode_cut = words._unicode
    ids = renderer.encode(CALL) + [renderer.tokenizer.eos_token_id]
    registry = CaptureSessionRegistry(renderer=renderer, backend=InstantBackend(ids))
    asyncio.run(play(registry, [conversation_bodies(args.turns, "warm\n", args.tool_chars)]))
    gc.collect()
    gc.freeze()  # as `openenv proxy` does
    turns: dict[str, list[tuple[float, bool]]] = {name: [] for name in ENCODERS}
    for rnd in range(args.rounds):
        for name in ENCODERS if rnd % 2 == 0 else ENCODERS[::-1]:
            words._unicode = unicode_cut if name == ENCODERS[0] else None
            plays = [
                conversation_bodies(args.turns, f"[{rnd}.{i}]\n", args.tool_chars, fresh(args.turns))
                for i in range(args.sessions)
            ]
            turns[name] += asyncio.run(play(registry, plays))
    rows = [summary(name, got) for name, got in turns.items()]
    print(
        f"\n{args.sessions} sessions x {args.turns} turns x {args.rounds} rounds per encoder, "
        f"{args.tool_chars}-character tool results; CPU-ms per turn (raw body to reply JSON)."
    )
    print(
        _table(
            rows,
            [
                ("encoder", "encoder", "s"),
                ("turns", "turns", "d"),
                ("p50", "p50", ".2f"),
                ("p90", "p90", ".2f"),
                ("p95", "p95", ".2f"),
                ("p99", "p99", ".2f"),
                ("max", "max", ".2f"),
                ("non_ascii_share", "non-ASCII share of turns", ".3f"),
                ("non_ascii_in_slowest", "non-ASCII share of the slowest 2%", ".3f"),
            ],
        )
    )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
