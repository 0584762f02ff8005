"""`openenv harness check`: the pinned pi qualifies, and a pi whose config file moved (the breaking change
a harness CLI ships: its provider config renamed) fails the check that depends on the config, by name.

Both run from a scratch cache of hard links to the pinned install (the real `npm install` path is the
installer's, exercised by `openenv harness install`; here the check must find the version already there
and must not touch the pinned cache), on one fixture, in the local sandbox, to keep CI time small.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from openenv.harness.catalog import get_spec, harness_dir
from openenv.harness.install import prefix
from tests.harness.e2e.conftest import require_installed

REPO = Path(__file__).resolve().parents[3]
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

DIST = "lib/node_modules/@mariozechner/pi-coding-agent/dist"


def _scratch_pi(cache: Path) -> Path:
    """A scratch cache holding pi at its pin: hard links to the pinned install (seconds, no network)."""
    require_installed("pi")
    cache.mkdir(parents=True)
    subprocess.run(["cp", "-al", str(prefix(get_spec("pi"))), str(cache / "pi")], check=True)
    return cache


def _check(cache: Path, results: Path, *extra: str) -> tuple[subprocess.CompletedProcess[str], dict]:
    argv = [
        sys.executable,
        "-m",
        "openenv.cli.main",
        "harness",
        "check",
        "pi",
        "--sandbox",
        "local",
        "--cache",
        str(cache),
        "--results",
        str(results),
        "--fixtures",
        "bash-strict-report",
        "--json",
        *extra,
    ]
    proc = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        timeout=800,
        check=False,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    verdict = json.loads((results / "verdict.json").read_text())
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == verdict, "--json prints the verdict written"
    return proc, verdict


def test_the_pinned_pi_passes_every_check_with_its_evidence(tmp_path):
    pinned = prefix(get_spec("pi"))
    before = sorted(p.name for p in (pinned / "bin").iterdir())
    spec_text = (harness_dir("pi") / "spec.yaml").read_text()
    proc, verdict = _check(_scratch_pi(tmp_path / "cache"), tmp_path / "results", "--pin")
    rows = {r["check"]: r for r in verdict["checks"]}
    assert list(rows) == ["install", "start", "dialect", "oracle:local", "sampled"]
    assert proc.returncode == 0 and all(r["ok"] for r in rows.values()), proc.stderr[-3000:]
    assert all(Path(r["evidence"]).exists() for r in rows.values()), rows
    assert "already installed" in (tmp_path / "results" / "install.log").read_text(), (
        "the scratch copy was used"
    )
    first = json.loads((tmp_path / "results" / "first-request.json").read_text())["requests"][0]
    assert first["dialect"] == "openai_chat" and "bash" in first["tools"]
    summary = [
        json.loads(line) for line in (tmp_path / "results" / "sampled.jsonl").read_text().splitlines()
    ][-1]
    assert summary["policy"] == "sample" and summary["sequences"] == 1
    assert summary["tokens_trained"] == summary["tokens_sampled"] > 0
    assert verdict["version"] == verdict["pinned"] and verdict["date"] and verdict["pinned_now"]
    assert "already the pin" in proc.stderr and (harness_dir("pi") / "spec.yaml").read_text() == spec_text
    assert sorted(p.name for p in (pinned / "bin").iterdir()) == before, "the pinned cache was not touched"


def test_a_pi_that_reads_its_provider_config_elsewhere_fails_start_by_name(tmp_path):
    cache = _scratch_pi(tmp_path / "cache")
    readers = [js for js in (cache / "pi" / DIST).rglob("*.js") if '"models.json"' in js.read_text()]
    assert readers, "pi no longer names models.json: find where it reads its provider config"
    for js in readers:  # the provider config renamed, as a release might; pi then finds no `openenv` provider
        text = js.read_text()
        js.unlink()  # a new file, not a write through the hard link into the pinned install
        js.write_text(text.replace('"models.json"', '"models.v2.json"'))
    spec_text = (harness_dir("pi") / "spec.yaml").read_text()

    proc, verdict = _check(cache, tmp_path / "results", "--pin")
    rows = {r["check"]: r for r in verdict["checks"]}
    assert proc.returncode == 1
    assert "pi@0" in proc.stderr and "failed check(s): start" in proc.stderr, proc.stderr[-2000:]
    assert rows["install"]["ok"] and rows["start"]["ok"] is False
    assert [rows[c]["ok"] for c in ("dialect", "oracle:local", "sampled")] == [None, None, None], "not run"
    assert "stays at" in proc.stderr and (harness_dir("pi") / "spec.yaml").read_text() == spec_text, (
        "no pin moved"
    )
    assert all(
        '"models.json"' in (prefix(get_spec("pi")) / js.relative_to(cache / "pi")).read_text()
        for js in readers
    ), "the pinned pi is intact"
