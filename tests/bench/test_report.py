"""The benchmark's CI smoke: `bench/report.py --quick --episode` runs every section whole, small (6b: one
real pi episode each way; section 6, sandbox start-up, is left to `--sandbox` runs by hand).

Nothing here asserts a number (a shared 2-core machine cannot hold one still); it asserts that every
section ran and produced its rows, so a bench that stops working (as section 3 once did, with
`KeyError: 'token'` from a proxy started without its admin API) fails CI instead of going unnoticed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness.e2e.conftest import require_installed

REPO = Path(__file__).resolve().parents[2]
REF_PYTHON = REPO / ".cache" / "reference-venv" / "bin" / "python"

# ~3 min on an idle 2-core machine, most of it starting proxies; a loaded one can take several times that
# (6.5 min in a whole CI run): `extended`, the scheduled tier. Every commit checks that each bench script
# imports (tests/bench/test_scripts_import.py).
pytestmark = [pytest.mark.vllm, pytest.mark.slow, pytest.mark.timeout(1200), pytest.mark.extended]


@pytest.fixture(scope="module")
def quick_report(vllm_url: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict]:
    if not REF_PYTHON.exists():
        pytest.skip("the benchmark's reference venv is missing: run scripts/install_reference.sh")
    require_installed("pi")  # section 6b runs real pi episodes
    out = tmp_path_factory.mktemp("bench")
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}
    done = subprocess.run(
        [
            sys.executable,
            "bench/report.py",
            "--quick",
            "--episode",
            "--vllm-url",
            vllm_url,
            "--out",
            str(out / "benchmarks.md"),
            "--json",
            str(out / "report.json"),
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=1100,
    )
    assert done.returncode == 0, f"bench/report.py --quick failed:\n{done.stderr[-6000:]}"
    return (out / "benchmarks.md").read_text(), json.loads((out / "report.json").read_text())


def test_every_section_is_written(quick_report: tuple[str, dict]) -> None:
    doc, _ = quick_report
    for heading in (
        "## 1. ",
        "## 1b. ",
        "## 1c. ",
        "## 2. ",
        "## 3. ",
        "## 4. ",
        "## 4b. ",
        "## 5. ",
        "## 5b. ",
        "## 6b. ",
        "## Targets",
    ):
        assert heading in doc, f"{heading!r} missing from the report"
    assert "failed" not in doc.split("## Targets")[0], "a section reported a failure"


def test_proxies_ran_against_the_reference(quick_report: tuple[str, dict]) -> None:
    _, data = quick_report
    latency = {row["target"] for row in data["latency"]}
    assert {"openenv proxy", "reference 0.10.0"} <= latency
    assert all(row["n"] > 0 for row in data["latency"])
    throughput = data["throughput"]
    assert not [row for row in throughput if "error" in row]
    assert {row["target"] for row in throughput} == {"ours (in-process engine)", "ours", "reference 0.10.0"}


def test_fidelity_replays_through_both_proxies(quick_report: tuple[str, dict]) -> None:
    """Section 3 opened sessions on both proxies (the bench's old KeyError) and exported rows."""
    _, data = quick_report
    rows = data["fidelity"]
    assert {row["proxy"] for row in rows} == {"ours", "reference 0.10.0"}
    assert {row["variant"] for row in rows} == {"canonical", "non-canonical"}
    ours = [row for row in rows if row["proxy"] == "ours"]
    assert all(row["turns"] > 0 and row["sequences"] >= 1 for row in ours)
    assert all(row["turns_trained"] == 1.0 for row in ours), ours  # every sampled turn lands in a trained row


def test_script_sections_returned_results(quick_report: tuple[str, dict]) -> None:
    _, data = quick_report
    for section in ("server", "guard", "dialects", "journal", "episode", "logprobs_mode"):
        assert data[section], f"section {section} returned nothing"


def test_only_server_replaces_section_4_and_its_targets_in_place(
    quick_report: tuple[str, dict], tmp_path: Path
) -> None:
    """`--only server --server-json` re-renders section 4 from a saved run; the rest of the page stays."""
    doc, data = quick_report
    run = dict(
        data["server"],
        rows=[dict(r, ops_vs_reference=r["ops_vs_reference"] + 100.0) for r in data["server"]["rows"]],
    )
    (tmp_path / "run.json").write_text(json.dumps(run))
    page = tmp_path / "benchmarks.md"
    page.write_text(doc)
    done = subprocess.run(
        [
            sys.executable,
            "bench/report.py",
            "--only",
            "server",
            "--server-json",
            str(tmp_path / "run.json"),
            "--out",
            str(page),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    new = page.read_text()
    ours = [r for r in run["rows"] if r["server"] == "ours"]
    for r in ours:
        assert f"- Env server, {r['transport']} x{r['clients']}: ours {r['ops_vs_reference']:.2f}x" in new
    assert new.count("- Env server, ") == len(ours)  # replaced, not appended
    before, after = doc.split("## 4. ")[0], new.split("## 4. ")[0]
    assert before.split("## Targets")[0] == after.split("## Targets")[0]
    assert doc.split("## 4b. ")[1] == new.split("## 4b. ")[1]
