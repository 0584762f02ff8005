"""Every benchmark script imports, every commit: the whole-report smoke (tests/bench/test_report.py, about
6 minutes) runs in the scheduled `extended` tier, so a script that stops importing (a moved module, a renamed
name) must still fail the every-commit run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

_IMPORT_ALL = """
import importlib.util, pathlib, sys
root = pathlib.Path("bench")
sys.path[:0] = [str(root), "."]
failed = []
for path in sorted(root.glob("*.py")):
    spec = importlib.util.spec_from_file_location(f"bench_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException as exc:
        failed.append(f"{path.name}: {exc!r}")
print("\\n".join(failed))
"""


def test_every_bench_script_imports() -> None:
    scripts = sorted((REPO / "bench").glob("*.py"))
    assert len(scripts) > 20
    done = subprocess.run(
        [sys.executable, "-c", _IMPORT_ALL], cwd=REPO, capture_output=True, text=True, timeout=300, check=True
    )
    assert done.stdout.strip() == "", f"bench scripts that do not import:\n{done.stdout}"
