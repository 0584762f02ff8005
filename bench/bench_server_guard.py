"""What the env server's security guard costs: ours as shipped vs the same server without it, same run.

    .venv/bin/python bench/bench_server_guard.py [--seconds 1.5] [--rounds 5] [--clients 1,16]

The guard (openenv/server/security.py: bearer token, Host/Origin checks, JSON-only bodies, size caps) is
one pure-ASGI middleware on every HTTP request and WebSocket handshake. Rows, both uvloop + httptools and
the echo env, with bench_server.py's load generators and method (interleaved rounds, medians, per-round
ratios):

  guarded     ours as shipped: every request carries `Authorization: Bearer ...` and is checked
  unguarded   the same app with the middleware removed (the baseline; not a supported configuration)

HTTP steps pay the check on every request; a WebSocket pays it once per connection, so WS steps/s should
not move.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_server as bs

GUARDED = bs.OURS
UNGUARDED = bs.OURS.replace(
    "uvicorn.run(create_app(env, max_sessions={max_sessions}, security=security),",
    "app = create_app(env, max_sessions={max_sessions}, security=security)\n"
    "app.user_middleware = [m for m in app.user_middleware if m.cls.__name__ != 'SecurityMiddleware']\n"
    "uvicorn.run(app,",
)
assert UNGUARDED != GUARDED, "bench_server.OURS changed; update the unguarded variant"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=1.5)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--warmup", type=float, default=0.5)
    parser.add_argument("--clients", default="1,16")
    parser.add_argument("--client-procs", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    ours = Path(sys.executable)
    servers = [
        bs.Server("guarded", ours, GUARDED, stateful_http=True, loop="uvloop", http="httptools"),
        bs.Server("unguarded", ours, UNGUARDED, stateful_http=True, loop="uvloop", http="httptools"),
    ]
    loads = [
        bs.Load(t, int(n), args.client_procs, args.seconds, args.warmup)
        for t in ("ws", "http")
        for n in args.clients.split(",")
    ]
    running = [(server, *server.start()) for server in servers]
    pool = ProcessPoolExecutor(
        args.client_procs, mp_context=multiprocessing.get_context("spawn"), initializer=os.setsid
    )
    list(pool.map(bs._spawn, range(args.client_procs)))
    rows = []
    try:
        for load in loads:
            samples: dict[str, list[bs.Sample]] = {}
            for r in range(args.rounds):
                for server, proc, url in running[r % 2 :] + running[: r % 2]:
                    samples.setdefault(server.name, []).append(bs.measure(pool, load, server, url, proc.pid))
            g, u = samples["guarded"], samples["unguarded"]
            row = {
                "transport": load.transport,
                "clients": load.clients,
                "guarded_ops_per_s": round(statistics.median(s.ops_per_s for s in g)),
                "unguarded_ops_per_s": round(statistics.median(s.ops_per_s for s in u)),
                "ops_ratio": round(
                    statistics.median(a.ops_per_s / b.ops_per_s for a, b in zip(g, u, strict=True)), 3
                ),
                "guarded_server_cpu_ms": round(statistics.median(s.server_cpu_ms for s in g), 4),
                "unguarded_server_cpu_ms": round(statistics.median(s.server_cpu_ms for s in u), 4),
                "cpu_ratio": round(
                    statistics.median(a.server_cpu_ms / b.server_cpu_ms for a, b in zip(g, u, strict=True)), 3
                ),
            }
            rows.append(row)
            print(
                f"  {load.transport:4} x{load.clients:<3} guarded {row['guarded_ops_per_s']:7} ops/s "
                f"{row['guarded_server_cpu_ms']:.4f} CPU-ms/op | unguarded {row['unguarded_ops_per_s']:7} ops/s "
                f"{row['unguarded_server_cpu_ms']:.4f} CPU-ms/op | ops x{row['ops_ratio']} CPU x{row['cpu_ratio']}",
                file=sys.stderr if args.json else sys.stdout,
                flush=True,
            )
    finally:
        pool.shutdown(cancel_futures=True)
        for _, proc, _ in running:
            proc.terminate()
            proc.wait(10)
    if args.json:
        print(
            json.dumps(
                {
                    "benchmark": "env_server_guard",
                    "cpus": os.cpu_count(),
                    "load_average": round(os.getloadavg()[0], 1),
                    "rounds": args.rounds,
                    "rows": rows,
                },
                indent=2,
            )
        )


if __name__ == "__main__":
    main()
