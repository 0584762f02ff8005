#!/usr/bin/env python3
"""Build the deterministic tiny chat model into the repo's `.cache/tiny-model` (or `--out DIR`).

The builder is part of the product (`openenv.models.tiny`); this wrapper only picks the repo's folder,
which `.ci/run`, `scripts/test.sh` and the tests' conftest point `OPENENV_TINY_MODEL` at.

Usage: python scripts/build_tiny_model.py [--out DIR] [--force]
"""

from __future__ import annotations

import sys
from pathlib import Path

from openenv.models.tiny import main

REPO_MODEL = Path(__file__).resolve().parent.parent / ".cache" / "tiny-model"

if __name__ == "__main__":
    argv = sys.argv[1:]
    sys.exit(main(argv if "--out" in argv else ["--out", str(REPO_MODEL), *argv]))
