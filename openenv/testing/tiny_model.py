"""Locate (and build on demand) the repo's deterministic tiny chat model."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

__all__ = ["tiny_model_path"]

REPO = Path(__file__).resolve().parents[2]


def tiny_model_path(build: bool = True) -> Path:
    """The tiny model folder: `$OPENENV_TINY_MODEL`, else `.cache/tiny-model`, built if missing."""
    path = Path(os.environ.get("OPENENV_TINY_MODEL", REPO / ".cache" / "tiny-model"))
    script = REPO / "scripts" / "build_tiny_model.py"
    if build and script.exists():
        subprocess.run([sys.executable, str(script), "--out", str(path)], check=True)
    if not (path / "config.json").exists():
        raise FileNotFoundError(f"no tiny model at {path}; run: python scripts/build_tiny_model.py --out {path}")
    return path
