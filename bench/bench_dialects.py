"""Dialect mapping cost on the real harness bodies: what the proxy spends before and after the model.

    .venv/bin/python bench/bench_dialects.py [--repeat 200] [--json]

For each recorded request in tests/capture/fixtures/ (Claude Code, Codex, Gemini CLI; 4-49 KB), the
median time of:
  - `json.loads`            the baseline: reading the body at all;
  - parse                   the dialect's pydantic validation of the body;
  - to_canonical            parse + mapping to the canonical request;
  - reply (JSON) / reply (SSE)  from_canonical / sse_events for a 1 KB completion with a tool call.
Ratios are against `json.loads` of the same body, measured in the same run. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from openenv.capture.canonical import Completion, ToolCallPart, Usage
from openenv.capture.dialects import ROUTES, RequestContext
from openenv.capture.dialects.state import DialectState

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "capture" / "fixtures"
DONE = Completion(
    id="bench",
    model="tiny",
    created=0,
    reasoning="Plan the edit. " * 20,
    text="Applying the change. " * 20,
    tool_calls=(ToolCallPart(id="call_1", name="bash", arguments=json.dumps({"command": "ls -la " * 40})),),
    finish_reason="tool_calls",
    usage=Usage(prompt_tokens=12000, completion_tokens=300),
)


def median_us(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6


def endpoint_for(path: str):
    from starlette.routing import compile_path

    for key, endpoint in ROUTES.items():
        match = compile_path(key.split(" ", 1)[1])[0].match(path.split("?")[0])
        if key.startswith("POST") and match:
            return endpoint.dialect, RequestContext(path_params=match.groupdict())
    raise LookupError(path)


def measure(raw: bytes, dialect, ctx: RequestContext, repeat: int) -> list[float]:
    """Median microseconds: json.loads, parse, to_canonical, JSON reply, SSE reply."""
    state = DialectState()
    req = dialect.parse(raw, ctx, state)
    return [
        median_us(lambda: json.loads(raw), repeat),
        median_us(lambda: dialect.parse(raw, ctx, state), repeat),
        median_us(lambda: dialect.to_canonical(dialect.parse(raw, ctx, state), state), repeat),
        median_us(lambda: dialect.from_canonical(DONE, req).model_dump_json(), repeat),
        median_us(lambda: b"".join(e.encode() for e in dialect.sse_events(DONE, req)), repeat),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--json", action="store_true", help="print the rows as JSON on stdout instead")
    args = parser.parse_args()
    columns = ["parse", "to_canonical", "reply JSON", "reply SSE"]
    rows = []
    for path in sorted(FIXTURES.glob("*/*.json")):
        recorded = json.loads(path.read_text())
        raw = json.dumps(recorded["body"]).encode()
        dialect, ctx = endpoint_for(recorded["path"])
        base, *cells = measure(raw, dialect, ctx, args.repeat)
        rows.append(
            {
                "request": f"{path.parent.name}/{path.stem}",
                "kb": len(raw) / 1024,
                "json_loads_us": base,
                **{f"{c}_us": cell for c, cell in zip(columns, cells)},
            }
        )
    if args.json:
        print(json.dumps({"benchmark": "dialects", "repeat": args.repeat, "rows": rows}, indent=1))
        return
    header = f"{'request':40} {'KB':>5} {'json.loads':>11} " + " ".join(f"{c:>14}" for c in columns)
    print(header)
    print("-" * len(header))
    for row in rows:
        base = row["json_loads_us"]
        cells = " ".join(f"{row[c + '_us']:7.0f}us {row[c + '_us'] / base:4.1f}x" for c in columns)
        print(f"{row['request']:40} {row['kb']:5.1f} {base:9.0f}us {cells}")


if __name__ == "__main__":
    main()
