"""`bench/qualification_matrix.py`, the one command behind docs/harnesses.md: verdicts and sweep rows become
harness x version x sandbox x check cells with their date and commit; the ledger keeps what this machine
does not hold, the newest evidence wins, and `--check` notices a page out of step with its ledger."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _verdict(folder: Path, *, version: str, date: str, oracle_ok: bool) -> None:
    checks = [
        {
            "check": "install",
            "ok": True,
            "detail": "npm x",
            "evidence": str(folder / "install.log"),
            "wall_s": 1.0,
        },
        {
            "check": "start",
            "ok": True,
            "detail": "ok",
            "evidence": str(folder / "first-request.json"),
            "wall_s": 0,
        },
        {"check": "dialect", "ok": True, "detail": "anthropic", "evidence": None, "wall_s": 0},
        {
            "check": "oracle:local",
            "ok": oracle_ok,
            "detail": "1/2 solved: bash-strict-report reward 0.0" if not oracle_ok else "2/2 solved",
            "evidence": str(folder / "oracle-local"),
            "wall_s": 0,
        },
        {"check": "oracle:docker", "ok": None, "detail": "not run", "evidence": None, "wall_s": 0},
        {
            "check": "sampled",
            "ok": True,
            "detail": "1 sequence",
            "evidence": str(folder / "sampled.jsonl"),
            "wall_s": 0,
        },
    ]
    folder.mkdir(parents=True)
    (folder / "verdict.json").write_text(
        json.dumps(
            {
                "harness": "claude-code",
                "version": version,
                "pinned": "2.1.332",
                "package": "@anthropic-ai/claude-code",
                "sandboxes": ["local", "docker"],
                "fixtures": ["fix-deep-merge"],
                "date": date,
                "commit": "abc1234",
                "results_dir": str(folder),
                "cache": "/c",
                "checks": checks,
                "wall_s": 300.0,
                "pinned_now": False,
            }
        )
    )


def _run(tmp: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "bench/qualification_matrix.py",
            "--verdicts",
            str(tmp / "checks"),
            "--sweep",
            str(tmp / "sweep.json"),
            "--ledger",
            str(tmp / "ledger.json"),
            "--page",
            str(tmp / "page.md"),
            *extra,
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
        check=False,
    )


def test_verdicts_and_sweep_rows_become_dated_cells_and_failures_say_why(tmp_path):
    _verdict(
        tmp_path / "checks" / "claude-code@2.1.400" / "a",
        version="2.1.400",
        date="2026-12-04T22:00:00+00:00",
        oracle_ok=False,
    )
    (tmp_path / "sweep.json").write_text(
        json.dumps(
            [
                {
                    "harness": "pi",
                    "task": t,
                    "sandbox": "docker",
                    "reward": r,
                    "version": "0.73.1",
                    "commit": "def5678",
                    "date": "2026-12-03T10:00:00+00:00",
                }
                for t, r in (("a", 1.0), ("b", 1.0), ("c", 0.0))
            ]
        )
    )
    proc = _run(tmp_path)
    assert proc.returncode == 0, proc.stderr
    page = (tmp_path / "page.md").read_text()
    row = next(line for line in page.splitlines() if line.startswith("| claude-code | 2.1.400 | local |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[3:] == [
        "pass 2026-12-04 abc1234",
        "pass 2026-12-04 abc1234",
        "pass 2026-12-04 abc1234",
        "**FAIL** 2026-12-04 abc1234",
        "pass 2026-12-04 abc1234",
        "·",
    ]
    assert "| claude-code | 2.1.400 | docker |" not in page, "a check that did not run is no evidence"
    assert "| pi | 0.73.1 | docker | · | · | · | · | · | **FAIL** 2026-12-03 def5678 |" in page
    assert "claude-code 2.1.400 local oracle: 1/2 solved: bash-strict-report reward 0.0" in page
    assert "pi 0.73.1 docker sweep: 2/3 tasks solved; not: c" in page


def test_the_ledger_keeps_old_evidence_and_the_newest_cell_wins(tmp_path):
    _verdict(
        tmp_path / "checks" / "claude-code@2.1.400" / "a",
        version="2.1.400",
        date="2026-12-04T22:00:00+00:00",
        oracle_ok=False,
    )
    assert _run(tmp_path).returncode == 0
    first = json.loads((tmp_path / "ledger.json").read_text())
    _verdict(
        tmp_path / "checks" / "claude-code@2.1.400" / "b",
        version="2.1.400",
        date="2026-12-05T08:00:00+00:00",
        oracle_ok=True,
    )
    shutil.rmtree(tmp_path / "checks" / "claude-code@2.1.400" / "a")  # evidence gone from this machine
    assert _run(tmp_path).returncode == 0
    cells = json.loads((tmp_path / "ledger.json").read_text())
    assert len(cells) == len(first)
    oracle = next(c for c in cells if c["check"] == "oracle")
    assert oracle["ok"] is True and oracle["date"].startswith("2026-12-05")
    assert "Why the failing cells failed" not in (tmp_path / "page.md").read_text()

    assert _run(tmp_path, "--check").returncode == 0
    (tmp_path / "page.md").write_text((tmp_path / "page.md").read_text().replace("pass", "PASS!", 1))
    drift = _run(tmp_path, "--check")
    assert drift.returncode == 1 and "differs" in drift.stdout


def test_the_shipped_page_is_what_its_ledger_gives():
    proc = subprocess.run(
        [sys.executable, "bench/qualification_matrix.py", "--check"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, f"{proc.stdout}: run .venv/bin/python bench/qualification_matrix.py"
