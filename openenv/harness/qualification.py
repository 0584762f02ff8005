"""Qualify one harness version in minutes: the checks behind `openenv harness check NAME[@VERSION]`.

A harness CLI that ships a breaking change (a renamed config file, a new wire field, a tool that
reads its arguments differently) breaks episodes mid-run. These checks run the version in question the
way episodes run it, and say which part broke:

- `install`: the version installs (into a scratch cache: the pinned installs stay as they are);
- `start`: headless, configured by its spec, it starts and makes its first model request;
- `dialect`: that request arrives in the spec's wire format, offers the shell tool, and the harness
  takes our replies in that format (the episode goes on);
- `oracle:<sandbox>`: the oracle policy solves the fixtures through the harness's own shell tool in each
  sandbox (the model-format tool calls parsed, delivered in the dialect, run, their results returned),
  each episode one merged training sequence, every auxiliary request tagged;
- `sampled`: an episode the tiny model samples gives one training sequence per linear session, trains
  every sampled token, keeps the auxiliary turns out, and counts the tool calls it parsed.

Every check writes its evidence (install log, first request, trajectories) under the results folder,
and `verdict.json` there holds the table with the date and the openenv commit, which
`bench/qualification_matrix.py` folds into docs/harnesses.md.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from openenv.capture.budget import Budget
from openenv.capture.engine import EngineSpec
from openenv.errors import OpenEnvError
from openenv.harness.environment import HarnessEnvironment
from openenv.harness.episode_settings import EpisodeSettings
from openenv.harness.fixtures import DEFAULT_FIXTURES, IMAGE_SUBSTITUTES, bash_fixtures
from openenv.harness.install import install_status
from openenv.harness.models import HarnessObservation
from openenv.harness.pins import install_version, scratch_cache, spec_at, using_cache
from openenv.harness.rollout import run_episode, save_trajectory
from openenv.harness.spec import HarnessSpec
from openenv.harness.summary import EpisodeSummary, Policy
from openenv.harness.tasks import Task, builtin_task, load_harbor_task
from openenv.paths import write_atomic
from openenv.resources import package_path

__all__ = ["CheckResult", "Verdict", "openenv_commit", "qualify", "write_verdict"]

SAMPLED_TASK = "implement-slugify"
Progress = Callable[[str], None]


class CheckResult(BaseModel):
    """One row of the verdict: a check, whether it passed (None: not run, an earlier check failed), why."""

    model_config = ConfigDict(extra="forbid")

    check: str
    ok: bool | None
    detail: str
    evidence: str | None = None
    wall_s: float = 0.0

    @property
    def result(self) -> str:
        return "pass" if self.ok else "skipped" if self.ok is None else "FAIL"


class Verdict(BaseModel):
    """Every check of one `harness check` run, with what was checked, when, and by which openenv."""

    model_config = ConfigDict(extra="forbid")

    harness: str
    version: str
    pinned: str
    package: str
    sandboxes: list[str]
    fixtures: list[str]
    date: str = Field(description="UTC, ISO 8601, when the check started")
    commit: str | None = Field(
        description="the openenv git commit that ran the check (None outside a checkout)"
    )
    results_dir: str
    cache: str = Field(description="the scratch cache the version was installed into")
    checks: list[CheckResult]
    wall_s: float = 0.0
    pinned_now: bool = Field(default=False, description="--pin moved the harness's pin to this version")

    @property
    def passed(self) -> bool:
        """Every check ran and passed (a check not run is not a pass)."""
        return bool(self.checks) and all(c.ok for c in self.checks)

    @property
    def failed(self) -> list[str]:
        """The checks that ran and failed (those not run because of them are left out)."""
        return [c.check for c in self.checks if c.ok is False]


def openenv_commit() -> str | None:
    """The git commit of the running openenv's source tree (`-dirty` with uncommitted changes), or None for
    an installed wheel."""
    root = package_path().resolve().parent
    proc = subprocess.run(
        ["git", "describe", "--always", "--dirty", "--abbrev=10", "--exclude", "*"],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
    )
    return proc.stdout.strip() or None if proc.returncode == 0 else None


def _load_fixture(task_id: str) -> Task:
    harbor = bash_fixtures()
    return load_harbor_task(harbor[task_id]) if task_id in harbor else builtin_task(task_id)


class _Recorder:
    """What an episode's observations showed, for the checks: each request's dialect, tools and tag."""

    def __init__(self, progress: Progress, label: str) -> None:
        self.progress, self.label = progress, label
        self.requests: list[dict[str, Any]] = []
        self.started = False

    def __call__(self, obs: HarnessObservation) -> None:
        if obs.pending is not None:
            self.started = True
            if not any(r["turn_id"] == obs.pending.turn_id for r in self.requests):
                self.requests.append(
                    {
                        "turn_id": obs.pending.turn_id,
                        "dialect": obs.pending.dialect,
                        "aux": obs.pending.aux,
                        "tools": [t.name for t in obs.pending.request.tools],
                        "messages": len(obs.pending.request.messages),
                        "system_chars": len(obs.pending.request.system_text()),
                    }
                )
        where = "done" if obs.done else f"turn {obs.turns + 1}"
        self.progress(f"{self.label}: {where} · {obs.tool_calls} tool calls · harness {obs.harness_status}")


class _Episode(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    task: str
    sandbox: str
    summary: EpisodeSummary
    requests: list[dict[str, Any]]
    started: bool
    tail: str
    trajectory: str


def _episode(
    spec: HarnessSpec,
    task: Task,
    *,
    sandbox: str,
    policy: Policy,
    engine: EngineSpec,
    out: Path,
    progress: Progress,
    budget: Budget | None = None,
    timeout_s: float = 300,
) -> _Episode:
    """One episode of `spec` (the version under check) with its evidence saved to `out` (a JSONL log)."""
    settings = EpisodeSettings.model_validate(  # the CLI's strs, validated into the settings' Literals
        {
            "sandbox": sandbox,
            "image_substitutes": IMAGE_SUBSTITUTES,
            "budget": budget,
            "turn_timeout_s": min(timeout_s, 180),
            "timeout_s": timeout_s,
        }
    )
    env = HarnessEnvironment(spec.name, engine=engine, settings=settings)
    env.spec = spec  # the version under check, not the pin (the scratch cache holds it)
    recorder = _Recorder(progress, f"{policy} {sandbox} {task.id}")
    try:
        obs, summary = run_episode(
            env, task, policy=policy, on_step=recorder, timeout_s=timeout_s, look_first=policy == "oracle"
        )
        save_trajectory(out, env, obs, summary)
    finally:
        env.close()
    return _Episode(
        task=task.id,
        sandbox=sandbox,
        summary=summary,
        requests=recorder.requests,
        started=recorder.started,
        tail=(obs.output_tail or "")[-1500:],
        trajectory=str(out),
    )


def _sequence_problems(ep: _Episode, spec: HarnessSpec, *, oracle: bool) -> list[str]:
    """Why this episode's training rows are not what a trainer needs (empty when they are)."""
    s = ep.summary
    origins = [line.origin for line in s.lineage]
    problems = []
    if origins.count("new") != 1 or any(o in ("fork", "retry") for o in origins):
        problems.append(f"{s.sequences} sequences for one linear session (origins {origins})")
    if s.tokens_trained != s.tokens_sampled:
        problems.append(f"{s.tokens_trained} of {s.tokens_sampled} sampled tokens trained")
    main = [r for r in ep.requests if not r["aux"]]
    if not spec.shell_tool.in_text and main:
        tools = set(main[0]["tools"])
        odd = [r for r in main[1:] if set(r["tools"]) != tools]
        if odd:
            problems.append(
                f"{len(odd)} untagged request(s) with other tools than the session's "
                f"({sorted(set(odd[0]['tools']))[:6]}): an auxiliary call the spec's aux rules miss?"
            )
    if oracle and s.tool_calls < 1 and spec.edit_format is None:  # edit blocks are no tool calls
        problems.append("no tool call reached the harness")
    return problems


class _Run:
    """One `qualify` call's state: where evidence goes and the rows so far."""

    def __init__(self, results: Path, progress: Progress) -> None:
        self.results, self.progress = results, progress
        self.rows: list[CheckResult] = []

    def add(
        self, check: str, ok: bool | None, detail: str, evidence: Path | None = None, start: float = 0
    ) -> bool:
        wall = round(time.monotonic() - start, 1) if start else 0.0
        self.rows.append(
            CheckResult(
                check=check,
                ok=ok,
                detail=detail,
                wall_s=wall,
                evidence=str(evidence) if evidence is not None else None,
            )
        )
        self.progress(f"{'✓' if ok else '-' if ok is None else '✗'} {check}: {detail}")
        return bool(ok)

    def skip(self, checks: list[str], why: str) -> None:
        for check in checks:
            self.add(check, None, f"not run: {why}")


def _first_episode_checks(run: _Run, spec: HarnessSpec, first: _Episode) -> bool:
    """`start` and `dialect` from the first episode's first request."""
    evidence = run.results / "first-request.json"
    write_atomic(
        evidence, json.dumps({"requests": first.requests[:3], "output_tail": first.tail}, indent=1) + "\n"
    )
    if not first.started:
        s = first.summary
        why = s.error or f"harness {s.harness_status} before its first model request"
        tail = " ".join(first.tail.split())[-300:]
        if tail and tail[-60:] not in " ".join(why.split()):  # the error may quote the output already
            why += f"; output: {tail}"
        run.add("start", False, why, evidence)
        return False
    run.add("start", True, f"first model request after start in episode {first.task}", evidence)
    req = first.requests[0]
    shell = spec.shell_tool.name
    if req["dialect"] != spec.dialect:
        return run.add(
            "dialect", False, f"first request spoke {req['dialect']}, the spec says {spec.dialect}", evidence
        )
    if spec.edit_format is not None:  # aider, cecli: no tools; the oracle's one reply is edit blocks
        if first.summary.reward != 1.0:
            return run.add(
                "dialect",
                False,
                f"the harness did not apply our {spec.edit_format} edit blocks (reward {first.summary.reward}, "
                f"status {first.summary.status}): {' '.join(first.tail.split())[-300:]}",
                evidence,
            )
        return run.add(
            "dialect",
            True,
            f"{spec.dialect}, {len(req['tools'])} tools, {spec.edit_format} edit blocks in the reply applied",
            evidence,
        )
    if not spec.shell_tool.in_text and shell not in req["tools"]:
        return run.add(
            "dialect",
            False,
            f"the shell tool {shell!r} is not among the {len(req['tools'])} tools "
            f"offered ({', '.join(req['tools'][:8])}): renamed?",
            evidence,
        )
    if first.summary.turns < 2:
        return run.add(
            "dialect",
            False,
            f"the harness took no second turn after our {spec.dialect} reply "
            f"(status {first.summary.status}): {' '.join(first.tail.split())[-300:]}",
            evidence,
        )
    tools = "text protocol" if spec.shell_tool.in_text else f"{len(req['tools'])} tools incl. {shell}"
    return run.add(
        "dialect", True, f"{spec.dialect}, {tools}, {first.summary.turns} turns answered", evidence
    )


def _oracle_check(run: _Run, spec: HarnessSpec, episodes: list[_Episode], sandbox: str, start: float) -> bool:
    bad = []
    for ep in episodes:
        s = ep.summary
        if s.reward != 1.0:
            bad.append(
                f"{ep.task}: reward {s.reward} ({s.status}; {s.error or s.no_reward_reason or 'tests failed'})"
            )
        bad += [f"{ep.task}: {p}" for p in _sequence_problems(ep, spec, oracle=True)]
    folder = run.results / f"oracle-{sandbox}"
    if bad:
        return run.add(f"oracle:{sandbox}", False, "; ".join(bad)[:600], folder, start)
    calls = sum(ep.summary.tool_calls for ep in episodes)
    aux = sum(ep.summary.aux_turns for ep in episodes)
    return run.add(
        f"oracle:{sandbox}",
        True,
        f"{len(episodes)}/{len(episodes)} solved, "
        + (
            f"{spec.edit_format} edit blocks applied"
            if spec.edit_format
            else f"{calls} tool calls parsed and run"
        )
        + f", 1 sequence each, {aux} aux turn(s) tagged",
        folder,
        start,
    )


def _sampled_check(run: _Run, spec: HarnessSpec, ep: _Episode, start: float) -> bool:
    s = ep.summary
    evidence = Path(ep.trajectory)
    if s.status == "error" or s.turns < 1:
        return run.add(
            "sampled", False, f"the episode ended in {s.status}: {s.error or 'no turn'}", evidence, start
        )
    problems = _sequence_problems(ep, spec, oracle=False)
    if problems:
        return run.add("sampled", False, "; ".join(problems), evidence, start)
    return run.add(
        "sampled",
        True,
        f"{s.turns} turns, {s.sequences} sequence(s) for {s.sequences} linear "
        f"session(s), {s.tokens_trained}/{s.tokens_sampled} sampled tokens trained, {s.aux_turns} aux "
        f"turn(s) tagged and untrained, {s.tool_calls} tool call(s) parsed ({s.malformed_tool_calls} "
        f"malformed)",
        evidence,
        start,
    )


def qualify(
    spec: HarnessSpec,
    version: str,
    *,
    sandboxes: list[str],
    results: Path,
    fixtures: tuple[str, ...] = DEFAULT_FIXTURES,
    engine: EngineSpec | None = None,
    cache: Path | None = None,
    progress: Progress = lambda _: None,
) -> Verdict:
    """Install `spec.name@version` into a scratch cache and run every check; never raises for a failing
    harness (the failing check is a row), so the verdict and its evidence are always written.

    Args:
        sandboxes: `local`, `docker` or both; the oracle runs the fixtures in each, the sampled episode in
            the first.
        results: the folder the evidence and `verdict.json` go to.
        engine: the sampled episode's engine (default: the in-process tiny model).
        cache: the scratch cache (default `pins.scratch_cache`).
    """
    started, date = time.monotonic(), datetime.now(UTC).isoformat(timespec="seconds")
    cache = cache or scratch_cache(spec.name, version)
    candidate = spec_at(spec, version)
    engine = engine or EngineSpec("local")
    run = _Run(results, progress)
    results.mkdir(parents=True, exist_ok=True)
    with using_cache(cache):
        _run_checks(run, candidate, version, sandboxes, fixtures, engine, cache)
    verdict = Verdict(
        harness=spec.name,
        version=version,
        pinned=spec.install.version,
        package=spec.install.package,
        sandboxes=sandboxes,
        fixtures=list(fixtures),
        date=date,
        commit=openenv_commit(),
        results_dir=str(results),
        cache=str(cache),
        checks=run.rows,
        wall_s=round(time.monotonic() - started, 1),
    )
    write_verdict(verdict)
    return verdict


def write_verdict(verdict: Verdict) -> Path:
    """Write `verdict.json` into the verdict's results folder (again after `--pin` moved the pin)."""
    return write_atomic(Path(verdict.results_dir) / "verdict.json", verdict.model_dump_json(indent=1) + "\n")


def _run_checks(
    run: _Run,
    spec: HarnessSpec,
    version: str,
    sandboxes: list[str],
    fixtures: tuple[str, ...],
    engine: EngineSpec,
    cache: Path,
) -> None:
    later = ["start", "dialect", *(f"oracle:{s}" for s in sandboxes), "sampled"]
    start = time.monotonic()
    log = run.results / "install.log"
    run.progress(f"installing {spec.install.package}@{version} into {cache}")
    try:
        took = install_version(spec, version, cache, log)
    except OpenEnvError as exc:
        run.add("install", False, exc.message, log, start)
        return run.skip(later, "the install failed")
    status = install_status(spec)
    if not status.ready:
        tail = " | ".join(log.read_text(errors="replace").strip().splitlines()[-3:])
        run.add(
            "install",
            False,
            f"the installer ended but {status.installed or 'nothing'} is installed, not {version}: {tail}",
            log,
            start,
        )
        return run.skip(later, "the install failed")
    run.add(
        "install", True, f"{spec.install.method} {spec.install.package}@{version} ({took:.0f} s)", log, start
    )
    try:
        tasks = [_load_fixture(t) for t in fixtures]
    except OpenEnvError as exc:
        run.add("start", False, f"a fixture could not be loaded: {exc.message}")
        return run.skip(later[1:], "no fixtures")
    for index, sandbox in enumerate(sandboxes):
        t0 = time.monotonic()
        folder = run.results / f"oracle-{sandbox}"
        episodes = []
        for task in tasks:
            episodes.append(
                _episode(
                    spec,
                    task,
                    sandbox=sandbox,
                    policy="oracle",
                    engine=engine,
                    out=folder / f"{task.id}.jsonl",
                    progress=run.progress,
                )
            )
            if index == 0 and len(episodes) == 1 and not _first_episode_checks(run, spec, episodes[0]):
                done = {r.check for r in run.rows}
                return run.skip([c for c in later if c not in done], f"{run.rows[-1].check} failed")
        _oracle_check(run, spec, episodes, sandbox, t0)
    t0 = time.monotonic()
    sampled = _episode(
        spec,
        builtin_task(SAMPLED_TASK),
        sandbox=sandboxes[0],
        policy="sample",
        engine=engine,
        out=run.results / "sampled.jsonl",
        progress=run.progress,
        budget=Budget(max_turns=4),
        timeout_s=240,
    )
    _sampled_check(run, spec, sampled, t0)
