"""The in-namespace forwarder's start (process spawn to listening), this tree's script vs a baseline one.

    git show a759e1b:openenv/harness/forwarder.py > /tmp/forwarder-baseline.py
    .venv/bin/python bench/bench_forwarder_start.py --baseline /tmp/forwarder-baseline.py [--runs 10]

Every sandboxed command (harness, verifier) waits for this script before it starts, so its start is
paid per command. Run as the sandbox runs it (`python -I -S`), alternating baseline and ours; reports
median wall seconds to the ready file and CPU seconds of the process (killed once ready).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

OURS = Path(__file__).resolve().parents[1] / "openenv" / "harness" / "forwarder.py"


def start_once(script: Path, folder: Path) -> tuple[float, float]:
    ready = folder / "ready"
    ready.unlink(missing_ok=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-I",
            "-S",
            str(script),
            "--listen",
            "127.0.0.1:0",
            "--to-unix",
            str(folder / "none.sock"),
            "--ready",
            str(ready),
        ]
    )
    while not ready.exists():
        if proc.poll() is not None:
            raise SystemExit(f"{script} exited before it was ready")
        time.sleep(0.002)
    wall = time.perf_counter() - start
    proc.kill()
    proc.wait()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, required=True, help="the forwarder.py to compare against")
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    results: dict[str, list[tuple[float, float]]] = {"baseline": [], "ours": []}
    scripts = {"baseline": args.baseline, "ours": OURS}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.runs):
            for name in ("baseline", "ours") if i % 2 == 0 else ("ours", "baseline"):
                results[name].append(start_once(scripts[name], Path(tmp)))
    for name, rows in results.items():
        wall = statistics.median(w for w, _ in rows)
        cpu = statistics.median(c for _, c in rows)
        print(f"{name:8} median wall {wall:.3f} s, CPU {cpu:.3f} s")
    print(f"load average {tuple(round(x, 1) for x in os.getloadavg())}, {args.runs} runs each, alternating")


if __name__ == "__main__":
    main()
