#!/usr/bin/env bash
# The test command (README): the whole suite on the repo's virtualenv. Extra args go to pytest.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
exec .venv/bin/python -m pytest -q -p no:cacheprovider --durations=15 "$@"
