"""The fixtures a harness is qualified on: the representative small set `harness check` runs by default,
the bash-only Harbor fixtures of a source checkout, and the images those run on where nothing can be pulled.

Kept apart from `qualification` (which imports the environment and its engine) so the command line can
name a bad fixture at once, and `bench/oracle_sweep.py` shares the same lists.
"""

from __future__ import annotations

from pathlib import Path

from openenv.resources import package_path

__all__ = ["DEFAULT_FIXTURES", "IMAGE_SUBSTITUTES", "bash_fixtures"]

# A built-in task whose solution has backticks and a heredoc (shell tools that filter commands must still
# run it), and a Harbor fixture whose solve.sh needs bash.
DEFAULT_FIXTURES = ("fix-deep-merge", "bash-strict-report")
# Nothing can be pulled here: the Harbor fixtures' images run on the offline image (scripts/build_python_image.sh).
IMAGE_SUBSTITUTES = {"python:3.11-slim": "openenv/python:latest", "ubuntu:24.04": "openenv/python:latest"}


def bash_fixtures() -> dict[str, Path]:
    """The bash-only Harbor fixtures of a source checkout (tests/fixtures/harbor/bash-*), by task id; none
    in an installed wheel (the built-in tasks still are)."""
    root = package_path().resolve().parent / "tests" / "fixtures" / "harbor"
    return {d.name: d for d in sorted(root.glob("bash-*")) if (d / "task.toml").is_file()}
