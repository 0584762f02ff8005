#!/usr/bin/env bash
# The house checks, in seconds, before the suite (.ci/run runs this first): ruff's lint rules and format
# check over the repository, and mypy over the public API (the modules users import: the env protocol
# and client, the harness env and its settings, the engine spec, the wire and trajectory models, the
# training seam). Configuration: pyproject.toml ([tool.ruff], [tool.mypy]).
#
# Usage: scripts/lint.sh [--fix]   (--fix applies ruff's fixes and formats the tree; review the diff)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
py="${OPENENV_VENV:-.venv}/bin/python"
PUBLIC_API=(
  openenv/__init__.py openenv/auto.py openenv/gym.py openenv/errors.py openenv/settings.py
  openenv/core openenv/client
  openenv/harness/environment.py openenv/harness/episode_settings.py openenv/harness/models.py
  openenv/capture/engine.py openenv/capture/canonical.py openenv/capture/trajectory.py
  openenv/train/__init__.py openenv/train/rollout.py openenv/train/trainer.py openenv/train/rewards.py
)
if [[ "${1:-}" == "--fix" ]]; then
  "$py" -m ruff check --fix .
  "$py" -m ruff format .
  exit 0
fi
status=0
echo "ruff check";          "$py" -m ruff check --quiet . || status=1
echo "ruff format --check"; "$py" -m ruff format --check --output-format concise --quiet . || status=1
echo "mypy (public API)";   "$py" -m mypy --no-error-summary "${PUBLIC_API[@]}" || status=1
exit $status
