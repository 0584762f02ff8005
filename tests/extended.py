"""A pytest plugin: the `extended` tier, tests that CI's every-commit run leaves to a scheduled run.

Every commit runs the suite in under 45 minutes on 2 cores (`.ci/run`); the tests marked `extended` (the
learning study's smoke, the oracle episode of every harness beyond one per dialect, the full-size soak,
GRPO on the long Claude Code episodes, the benchmark report's smoke) add coverage that a daily run is
enough for. They are *deselected*, not skipped, unless the run asks for them, so CI's rule that a skipped
test fails (OPENENV_REQUIRE_ALL=1) still holds for everything that runs:

    scripts/test.sh --extended        # or OPENENV_EXTENDED=1, or `-m extended` for the tier alone

A test can ask `extended_run(config)` to size itself (the soak runs 200 episodes there, fewer per commit).
The repository's root conftest.py imports the hooks, so they cover tests/, envs/echo/tests/ and
research/learning/tests/ alike.
"""

from __future__ import annotations

import os

import pytest

from openenv.settings import parse_flag

__all__ = ["extended_run", "pytest_addoption", "pytest_collection_modifyitems", "pytest_configure"]

MARKER = "extended"
ENV = "OPENENV_EXTENDED"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--extended",
        action="store_true",
        default=False,
        help="also run the tests marked `extended` (the scheduled tier; also OPENENV_EXTENDED=1)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}: a long test every commit leaves to the scheduled run "
        "(`scripts/test.sh --extended`; see tests/extended.py)",
    )


def extended_run(config: pytest.Config) -> bool:
    """Whether this run includes the extended tier: `--extended`, OPENENV_EXTENDED=1, or a `-m` naming it."""
    asked = parse_flag(ENV, os.environ.get(ENV), False)
    return (
        bool(config.getoption("--extended", default=False))
        or asked
        or MARKER in (config.option.markexpr or "")
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect the extended tier unless the run asked for it (deselected tests are neither run nor skipped)."""
    if extended_run(config):
        return
    left = [item for item in items if item.get_closest_marker(MARKER)]
    if left:
        config.hook.pytest_deselected(items=left)
        items[:] = [item for item in items if not item.get_closest_marker(MARKER)]
