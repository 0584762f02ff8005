"""The Harbor road's cost: one oracle episode through `run_rollout` vs the same episode through `openenv run`.

    .venv/bin/python bench/bench_harbor.py [--rounds 3] [--harness pi] [--task always-exit-zero] [--json]

Side by side in one run, alternating so load drifts hit both:

- **openenv run**: the episode exactly as `openenv run --harness H --policy oracle --tasks FIXTURES --task T`
  plays it (`openenv.cli.harness._run_one`: HarnessEnvironment, local sandbox, capture proxy, verifier,
  JSONL log), in this process with the engine already loaded; its wall is the summary's `wall_s`.
- **run_rollout**: `openenv serve harbor --tasks FIXTURES` (started once, engine loaded by a warm-up
  rollout), driven by the reference's own `HarborEnv` in the reference's venv; its wall is what that
  client measures around `run_rollout(harness="oracle")`: the WebSocket and MCP framing, admission,
  the episode, the turn mapping and the result's JSON both ways.

Reported: the median wall of each and the ratio run_rollout / openenv run (target <= 1.1x), with the
1-minute load average. Needs the harness installed and the reference venv (scripts/install_reference.sh).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures" / "harbor"
REFERENCE_PY = Path(
    os.environ.get("OPENENV_REFERENCE_PYTHON", REPO / ".cache" / "reference-venv" / "bin" / "python")
)


def _cli_episode(harness: str, task: str, out: Path) -> float:
    from openenv.cli.harness import _run_one
    from openenv.harness.tasks import find_task

    the_task = find_task(task, str(FIXTURES))
    summary = _run_one(
        harness,
        the_task,
        str(FIXTURES),
        "local",
        None,
        None,
        "oracle",
        "auto",
        "local",
        None,
        out / f"cli-{time.monotonic_ns()}.jsonl",
    )
    assert summary.reward == 1.0, summary
    return float(summary.wall_s)


def _rollout(url: str, index: int) -> float:
    script = textwrap.dedent(f"""
        import json, time
        from openenv.harbor.client import HarborEnv
        env = HarborEnv(base_url={url!r})
        env.capabilities()  # connected: the session exists before the clock starts
        start = time.monotonic()
        r = env.run_rollout(split="", task_index={index}, harness="oracle", sandbox="local")
        wall = time.monotonic() - start
        env.close()
        print(json.dumps({{"wall": wall, "ok": r.ok, "reward": r.reward, "server_wall": r.wall_s}}))
    """)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    done = subprocess.run(
        [str(REFERENCE_PY), "-I", "-c", script],
        cwd="/",
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=900,
    )
    out = json.loads(done.stdout.splitlines()[-1])
    assert out["ok"] and out["reward"] == 1.0, out
    return float(out["wall"])


def measure(rounds: int, harness: str, task: str, work: Path) -> dict[str, Any]:
    from openenv.core.net import free_port, wait_for_health

    names = sorted(p.name for p in FIXTURES.iterdir() if (p / "task.toml").is_file())
    port = free_port()
    log = (work / "serve.log").open("w")
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "openenv.cli.main",
            "serve",
            "harbor",
            "--tasks",
            str(FIXTURES),
            "--port",
            str(port),
            "--no-token",
            "--oracle-harness",
            harness,
            "--runs-dir",
            str(work / "runs"),
            "--max-rollouts",
            "1",
        ],
        cwd=REPO,
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_health(url, timeout_s=180)
        index = names.index(task)
        _rollout(url, index)  # warm-up: the server's engine loads on its first episode
        _cli_episode(harness, task, work)  # warm-up: this process's engine
        rows = []
        for i in range(rounds):
            pair = [
                ("run_rollout", lambda: _rollout(url, index)),
                ("openenv run", lambda: _cli_episode(harness, task, work)),
            ]
            for name, run in pair if i % 2 == 0 else pair[::-1]:
                wall = run()
                rows.append({"road": name, "wall_s": wall, "load": os.getloadavg()[0]})
                print(f"{name}: {wall:.2f} s (load {rows[-1]['load']:.1f})", file=sys.stderr)
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()
    cli = statistics.median(r["wall_s"] for r in rows if r["road"] == "openenv run")
    rollout = statistics.median(r["wall_s"] for r in rows if r["road"] == "run_rollout")
    return {
        "harness": harness,
        "task": task,
        "rounds": rounds,
        "rows": rows,
        "cli_median_s": cli,
        "rollout_median_s": rollout,
        "ratio": rollout / cli,
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }


def section(data: dict[str, Any]) -> tuple[str, str]:
    """Section 6c of docs/benchmarks.md and its Targets line."""
    loads = [r["load"] for r in data["rows"]]
    text = textwrap.dedent(f"""\
        ## 6c. Harbor road: `run_rollout` vs `openenv run` (same oracle episode)

        Measured {data["when"]} by `bench/bench_harbor.py` ({data["rounds"]} rounds, alternating; 1-min load
        {min(loads):.1f}-{max(loads):.1f}): {data["harness"]} on the Harbor fixture `{data["task"]}`, `--policy oracle`,
        local sandbox, tiny model on the local engine. `openenv run` is the CLI's own episode function in one
        process with the engine loaded; `run_rollout` is the reference's `HarborEnv` (its venv) calling
        `openenv serve harbor`, timed by the client around the call.

        | road | median wall s |
        |---|---|
        | `openenv run` | {data["cli_median_s"]:.2f} |
        | `run_rollout` (reference client, WebSocket) | {data["rollout_median_s"]:.2f} |
        | ratio | **{data["ratio"]:.2f}x** (target <= 1.1x) |

        Every run, in order: {", ".join(f"{r['road']} {r['wall_s']:.1f} s" for r in data["rows"])}. On a
        machine this loaded the spread of one road (seconds) is larger than the gap between the roads; the
        ratio of medians is the figure, and its noise is of that size.
        """)
    line = (
        f"Harbor road overhead (run_rollout / openenv run, same oracle episode): {data['ratio']:.2f}x "
        f"(target <= 1.1x): {'**met**' if data['ratio'] <= 1.1 else '**not met**'}"
    )
    return text, line


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--harness", default="pi")
    parser.add_argument("--task", default="always-exit-zero")
    parser.add_argument("--json", action="store_true", help="print the numbers as JSON on stdout")
    args = parser.parse_args()
    import tempfile

    with tempfile.TemporaryDirectory(prefix="bench-harbor-") as tmp:
        data = measure(args.rounds, args.harness, args.task, Path(tmp))
    if args.json:
        print(json.dumps(data))
    else:
        print(section(data)[0])


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    main()
