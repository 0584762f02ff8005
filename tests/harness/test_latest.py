"""`openenv harness outdated`: the newest version each registry offers, through npm's and pip's own clients,
against stand-in registries on loopback (the `registry` fixture: an npm packument server and a PEP 503
simple index), and one light query to the real npm registry."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote

import pytest

from openenv.harness.catalog import get_spec
from openenv.harness.latest import latest_version, latest_versions

REPO = Path(__file__).resolve().parents[2]


def test_an_npm_harness_behind_its_registry_is_outdated_and_names_the_newest(registry):
    spec = get_spec("pi")
    registry.packages[spec.install.package] = ["0.1.0", spec.install.version, "0.99.2"]
    row = latest_version(spec, timeout_s=20)
    assert (row.status, row.latest, row.pinned, row.registry) == (
        "outdated",
        "0.99.2",
        spec.install.version,
        "npm",
    )
    assert any(
        spec.install.package.replace("/", "%2f") in p.lower() or spec.install.package in unquote(p)
        for p in registry.seen
    ), registry.seen


def test_a_pin_equal_to_the_newest_is_current_and_a_pin_past_it_is_ahead(registry):
    spec = get_spec("pi")
    registry.packages[spec.install.package] = [spec.install.version]
    assert latest_version(spec, timeout_s=20).status == "current"
    registry.packages[spec.install.package] = ["0.0.9"]
    assert latest_version(spec, timeout_s=20).status == "ahead"


def test_a_pip_harness_reads_the_simple_index_and_compares_numerically(registry):
    spec = get_spec("mini-swe-agent")
    registry.packages[spec.install.package] = ["2.4.6", "2.10.0", "2.9.1"]  # 2.10 > 2.9, not as text
    row = latest_version(spec, timeout_s=20)
    assert (row.status, row.latest, row.registry) == ("outdated", "2.10.0", "pypi"), row


def test_a_package_the_registry_lacks_is_unreachable_with_the_clients_reason(registry):
    row = latest_version(get_spec("pi"), timeout_s=20)
    assert row.status == "unreachable" and row.latest is None
    assert row.error and ("404" in row.error or "Not found" in row.error), row.error


def test_a_registry_that_never_answers_costs_one_timeout_not_a_hang(registry):
    registry.stall = True
    rows = latest_versions([get_spec("pi"), get_spec("codex")], timeout_s=2)
    assert [r.status for r in rows] == ["unreachable", "unreachable"], rows
    assert [r.name for r in rows] == ["pi", "codex"]


def test_the_cli_prints_one_json_row_per_harness_and_fails_when_a_registry_gave_none(registry):
    spec = get_spec("pi")
    registry.packages[spec.install.package] = ["0.99.2"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cmd = [
        sys.executable,
        "-m",
        "openenv.cli.main",
        "harness",
        "outdated",
        "pi",
        "codex",
        "--json",
        "--timeout",
        "10",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120, check=False, cwd=REPO)
    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [(r["name"], r["status"], r["latest"]) for r in rows] == [
        ("pi", "outdated", "0.99.2"),
        ("codex", "unreachable", None),
    ], proc.stderr
    assert proc.returncode == 1, "a harness whose registry gave no version is not a clean answer"
    registry.packages[get_spec("codex").install.package] = [get_spec("codex").install.version]
    table = subprocess.run(
        cmd[:-3], capture_output=True, text=True, env=env, timeout=120, check=False, cwd=REPO
    )
    assert table.returncode == 0, table.stderr
    assert "newer available" in table.stdout and "openenv harness check pi@0.99.2" in table.stdout


def test_the_real_npm_registry_answers_the_light_query():
    """The light path against registry.npmjs.org (CI reaches npm): one `npm view` of one package."""
    row = latest_version(get_spec("pi"), timeout_s=30)
    offline = ("ENOTFOUND", "EAI_AGAIN", "ECONNREFUSED", "ETIMEDOUT", "no answer")
    if row.status == "unreachable" and any(word in (row.error or "") for word in offline):
        pytest.skip(f"npm's registry cannot be reached from here: {row.error}")
    assert row.status in ("current", "outdated"), row
    assert row.latest and row.latest[0].isdigit()
