#!/usr/bin/env bash
# The test command (README): the whole suite on the repo's virtualenv. Extra args go to pytest.
# Run `scripts/install.sh --all` first (the README's command does): without a prerequisite a test is
# skipped locally (the last line of the run counts the skips and why) and fails in CI.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# The model scripts/install.sh --all built (tests/conftest.py sets the same default).
export OPENENV_TINY_MODEL="${OPENENV_TINY_MODEL:-$PWD/.cache/tiny-model}"
exec .venv/bin/python -m pytest -q -p no:cacheprovider --durations=15 "$@"
