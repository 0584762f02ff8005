"""The oracle sweep: every harness applies every task's reference solution, in each sandbox, and a
harness x task table says which were solved.

    .venv/bin/python bench/oracle_sweep.py                       # every harness, built-in + bash fixtures, both sandboxes
    .venv/bin/python bench/oracle_sweep.py --sandbox docker --harness pi,openhands --tasks bash

The oracle runs each solution as Harbor's oracle agent does (`bash /solution/solve.sh` in the workdir,
solution/ staged at /solution for the oracle only) through the harness's own shell tool, so a cell is
1 only when the unmodified harness ran the script and the task's own verifier scored it. `--tasks`
takes `builtin`, `bash` (the Harbor fixtures in tests/fixtures/harbor/ whose scripts need bash:
`bash-*`) or a Harbor task folder / task-set path; comma-separated.

Docker runs need the offline images (scripts/build_base_image.sh, scripts/build_python_image.sh); the
Harbor fixtures' `python:3.11-slim` is substituted by `openenv/python:latest` (`--image-substitute`,
as the tests do). The table goes to stdout, the per-episode rows to `--out` (JSON), rewritten after
every episode: a sweep stopped half-way resumes where it stopped (rows already in `--out` for the same
harness, task and sandbox are kept and not run again; `--fresh` runs every cell of this sweep again;
rows of cells outside it stay in the file). Exit code 0 when every cell is 1.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from openenv.capture.engine import EngineSpec
from openenv.harness.catalog import get_spec, harness_names
from openenv.harness.environment import HarnessEnvironment
from openenv.harness.episode_settings import EpisodeSettings
from openenv.harness.fixtures import IMAGE_SUBSTITUTES
from openenv.harness.install import docker_blocker, install_status
from openenv.harness.qualification import openenv_commit
from openenv.harness.rollout import run_episode
from openenv.harness.sandbox.images import parse_substitutes
from openenv.harness.tasks import Task, load_harbor_task, load_task_set
from openenv.paths import write_atomic

BASH_FIXTURES = ROOT / "tests" / "fixtures" / "harbor"
DEFAULT_SUBSTITUTES = [f"{a}={b}" for a, b in IMAGE_SUBSTITUTES.items()]
COMMIT = openenv_commit()


def load_tasks(spec: str) -> list[Task]:
    """`builtin`, `bash` (the bash-* Harbor fixtures), or a path `load_task_set` reads; comma-separated."""
    tasks: list[Task] = []
    for part in filter(None, (p.strip() for p in spec.split(","))):
        if part == "bash":
            tasks += [
                load_harbor_task(d)
                for d in sorted(BASH_FIXTURES.glob("bash-*"))
                if (d / "task.toml").is_file()
            ]
        else:
            tasks += load_task_set(part)
    return tasks


def one_episode(
    harness: str, task: Task, sandbox: str, substitutes: dict[str, str], backend: str
) -> dict[str, object]:
    """One oracle episode; never raises (a failure to start is a row with the error)."""
    start = time.monotonic()
    row: dict[str, object] = {
        "harness": harness,
        "task": task.id,
        "sandbox": sandbox,
        "version": install_status(get_spec(harness)).installed,
        "commit": COMMIT,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
    }  # for qualification_matrix.py
    settings = EpisodeSettings(sandbox=sandbox, image_substitutes=substitutes)  # type: ignore[arg-type]
    env = HarnessEnvironment(harness, engine=EngineSpec.of(backend), settings=settings)
    try:
        obs, summary = run_episode(env, task, policy="oracle")
        row.update(
            reward=summary.reward,
            status=summary.status,
            reward_status=summary.reward_status,
            turns=summary.turns,
            tool_calls=summary.tool_calls,
            no_reward_reason=summary.no_reward_reason,
        )
        if summary.reward != 1.0:
            row["tail"] = (obs.output_tail or "")[-600:]
    except Exception as exc:
        row.update(reward=None, status="error", error=f"{type(exc).__name__}: {exc}"[:600])
    finally:
        env.close()
    row["wall_s"] = round(time.monotonic() - start, 1)
    return row


def previous_rows(
    out: Path, wanted: set[tuple[str, str, str]]
) -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    """The rows of an earlier (possibly stopped) sweep: those this one would run again, and the others
    (other harnesses, tasks or sandboxes), which stay in `--out` untouched."""
    if not out.is_file():
        return [], []
    try:
        rows = json.loads(out.read_text())
    except ValueError:
        print(f"note: {out} is not JSON; running everything", file=sys.stderr)
        return [], []
    mine = [r for r in rows if (r.get("harness"), r.get("task"), r.get("sandbox")) in wanted]
    return mine, [r for r in rows if r not in mine]


def cell(row: dict[str, object] | None) -> str:
    if row is None:
        return "-"
    if row.get("reward") == 1.0:
        return "1"
    return "E" if row.get("reward") is None else "0"


def table(rows: list[dict[str, object]], harnesses: list[str], tasks: list[Task], sandbox: str) -> str:
    """harness x task for one sandbox: 1 solved, 0 scored 0, E no reward (an error), - not run."""
    by = {(r["harness"], r["task"]): r for r in rows if r["sandbox"] == sandbox}
    ids = [t.id for t in tasks]
    width = max(len(h) for h in harnesses)
    lines = [
        f"sandbox: {sandbox}",
        "columns: " + "  ".join(f"{i + 1}={t}" for i, t in enumerate(ids)),
        " " * width + " | " + " ".join(f"{i + 1:>2}" for i in range(len(ids))) + " | solved",
    ]
    full = 0
    for harness in harnesses:
        cells = [cell(by.get((harness, t))) for t in ids]
        solved = cells.count("1")
        full += solved == len(ids)
        lines.append(
            f"{harness:<{width}} | " + " ".join(f"{c:>2}" for c in cells) + f" | {solved}/{len(ids)}"
        )
    lines.append(f"{sandbox}: {full} of {len(harnesses)} harnesses solve every task ({len(ids)} tasks)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--harness", default="all", help="comma-separated names, or all (default)")
    parser.add_argument(
        "--tasks", default="builtin,bash", help="builtin, bash, or task-set paths; comma-separated"
    )
    parser.add_argument("--only", default="", help="comma-separated task ids to keep")
    parser.add_argument("--sandbox", default="local,docker", help="local, docker, or both (default)")
    parser.add_argument("--image-substitute", action="append", default=None, metavar="FROM=TO")
    parser.add_argument(
        "--backend", default="local", help="local (in-process tiny model) or vllm ($OPENENV_VLLM_URL)"
    )
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--out", type=Path, default=ROOT / "artifacts" / "oracle_sweep.json")
    parser.add_argument("--fresh", action="store_true", help="run every episode, even those already in --out")
    args = parser.parse_args(argv)

    harnesses = (
        harness_names()
        if args.harness == "all"
        else [h.strip() for h in args.harness.split(",") if h.strip()]
    )
    tasks = load_tasks(args.tasks)
    if args.only:
        keep = set(args.only.split(","))
        tasks = [t for t in tasks if t.id in keep]
    sandboxes = [s.strip() for s in args.sandbox.split(",") if s.strip()]
    substitutes = parse_substitutes(args.image_substitute or DEFAULT_SUBSTITUTES)
    for name in harnesses:  # what cannot start is said before anything runs
        spec = get_spec(name)
        if not install_status(spec).ready:
            print(f"note: {name} is not installed (openenv harness install {name})", file=sys.stderr)
        elif "docker" in sandboxes and (reason := docker_blocker(spec)) is not None:
            print(f"note: {name} cannot run in Docker: {reason}", file=sys.stderr)

    jobs = [(h, t, s) for s in sandboxes for h in harnesses for t in tasks]
    # Cells outside this sweep (a local sweep's rows when this one is docker's) stay in --out.
    rows, others = previous_rows(args.out, {(h, t.id, s) for h, t, s in jobs})
    rows = [] if args.fresh else rows
    done = {(r["harness"], r["task"], r["sandbox"]) for r in rows}
    todo = [(h, t, s) for h, t, s in jobs if (h, t.id, s) not in done]
    print(
        f"{len(jobs)} oracle episodes: {len(harnesses)} harnesses x {len(tasks)} tasks x {sandboxes}"
        + (f"; {len(rows)} already in {args.out}, {len(todo)} to run" if rows else ""),
        file=sys.stderr,
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(max_workers=max(1, args.concurrency)) as pool:
        futures = [pool.submit(one_episode, h, t, s, substitutes, args.backend) for h, t, s in todo]
        for number, future in enumerate(futures, start=1):
            row = future.result()
            rows.append(row)
            write_atomic(args.out, json.dumps(others + rows, indent=1) + "\n")
            print(
                f"[{number}/{len(todo)}] {row['sandbox']:<6} {row['harness']:<15} {row['task']:<28} "
                f"{cell(row)} {row.get('status')} {row['wall_s']}s {row.get('error') or row.get('no_reward_reason') or ''}",
                file=sys.stderr,
                flush=True,
            )
    for sandbox in sandboxes:
        print(table(rows, harnesses, tasks, sandbox) + "\n")
    return 0 if all(cell(r) == "1" for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
