"""The research area's scripts (`learn.py`, `learn_cpu.py`, the page writers) import each other by name, as a
script's own folder is on `sys.path` when it runs; these tests import them the same way."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
