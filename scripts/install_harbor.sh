#!/usr/bin/env bash
# Idempotent: harbor==0.25.0 (Harbor's own task loader and reward parser) in a Python 3.12 virtualenv
# at .cache/harbor-venv, for tests/harness/tasks/test_harbor_crosscheck.py, which checks that our Harbor
# loader and reward parser agree with Harbor's. Python 3.12 comes from PATH or pyenv.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$here/.cache/harbor-venv"
version=0.25.0
say() { printf '\033[1m[install_harbor]\033[0m %s\n' "$*"; }
if [[ -x "$venv/bin/python" ]] && "$venv/bin/python" -c "import importlib.metadata as m; assert m.version('harbor') == '$version'" 2>/dev/null; then
  say "harbor $version ready in $venv"
  exit 0
fi
py=""
for candidate in python3.12 "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.12*/bin/python3.12; do
  if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c 'import sys; assert sys.version_info[:2] == (3, 12)' 2>/dev/null; then
    py="$candidate"; break
  fi
done
if [[ -z "$py" ]]; then
  say "no python3.12 found (on PATH or under pyenv); install it, e.g. \`pyenv install 3.12\`"
  exit 1
fi
say "installing harbor==$version into $venv (python: $py)"
"$py" -m venv "$venv"
bash "$here/scripts/pip_install.sh" "$venv/bin/python" "harbor==$version"  # uv when install.sh put one
say "harbor $version ready"
