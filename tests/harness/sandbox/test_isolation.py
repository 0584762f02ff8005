"""`runtime_paths`: what every local sandbox shows read-only of the host, read once and reused only while
what it was read from is unchanged."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from openenv.harness.sandbox import isolation


def _venv(cache: Path, name: str, home: Path) -> Path:
    venv = cache / name
    venv.mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text(f"home = {home / 'bin'}\nversion = 3.11\n")
    return venv


@pytest.fixture()
def reads(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Every harness venv's `pyvenv.cfg` read by `runtime_paths`."""
    seen: list[Path] = []
    real = isolation._venv_home

    def counted(venv: Path) -> Path | None:
        seen.append(venv)
        return real(venv)

    monkeypatch.setattr(isolation, "_venv_home", counted)
    isolation._RUNTIME_PATHS.clear()
    return seen


def test_an_unchanged_cache_is_not_read_again(tmp_path: Path, reads: list[Path]) -> None:
    python = tmp_path / "pythons" / "3.11"
    python.mkdir(parents=True)
    _venv(tmp_path / "cache", "aider", python)
    first = isolation.runtime_paths(tmp_path / "cache")
    assert python in first and (tmp_path / "cache").resolve() in first
    assert Path(sys.prefix).resolve() in first
    assert isolation.runtime_paths(tmp_path / "cache") == first
    assert len(reads) == 1  # the second sandbox reused the first's answer


def test_a_new_or_changed_harness_venv_is_seen_by_the_next_sandbox(tmp_path: Path, reads: list[Path]) -> None:
    cache, one, two = tmp_path / "cache", tmp_path / "py" / "one", tmp_path / "py" / "two"
    one.mkdir(parents=True)
    two.mkdir(parents=True)
    _venv(cache, "aider", one)
    assert one in isolation.runtime_paths(cache) and two not in isolation.runtime_paths(cache)
    _venv(cache, "openhands", two)  # a harness installed since
    assert {one, two} <= set(isolation.runtime_paths(cache))
    cfg = cache / "aider" / "pyvenv.cfg"
    cfg.write_text(f"home = {two / 'bin'}\n")  # recreated on another Python
    os.utime(cfg, ns=(0, 1))
    paths = isolation.runtime_paths(cache)
    assert two in paths and one not in paths


def test_a_folder_gone_since_is_not_shown(tmp_path: Path, reads: list[Path]) -> None:
    python = tmp_path / "py"
    python.mkdir()
    extra = tmp_path / "extra"
    extra.mkdir()
    assert extra in isolation.runtime_paths(None, extra=(extra,))
    extra.rmdir()
    assert extra not in isolation.runtime_paths(None, extra=(extra,))
