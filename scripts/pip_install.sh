#!/usr/bin/env bash
# pip_install.sh PYTHON [pip-install arguments...]: install into PYTHON's environment with uv when there is
# one (OPENENV_UV, else `uv` on the PATH), else with PYTHON's own pip. uv is about twenty times faster here
# (the main job's install: 255 s with pip, 16 s with uv); it does not read pip.conf or PIP_* variables, so
# the sources pip is configured with (`pip config list`: an index, extra indexes, find-links, constraints)
# are passed on, merged as pip merges them (the best match over every index).
# Used by scripts/install.sh and scripts/install_harnesses.sh (shipped as openenv/harness/pip_install.sh).
set -euo pipefail
py=$1; shift
uv="${OPENENV_UV:-$(command -v uv || true)}"
if [[ -z "$uv" || ! -x "$uv" ]]; then
  exec "$py" -m pip install --disable-pip-version-check -q "$@" 2> >(grep -v "is ignored: it is neither" >&2)
fi
sources=(--index-strategy unsafe-best-match)
while IFS= read -r line; do
  key=${line%%=*}; value=${line#*=}; value=${value#\'}; value=${value%\'}
  case "$key" in
    *.extra-index-url) for v in $value; do sources+=(--extra-index-url "$v"); done ;;
    *.index-url) sources+=(--index-url "$value") ;;
    *.find-links) for v in $value; do sources+=(--find-links "$v"); done ;;
    *.constraint) for v in $value; do sources+=(--constraint "$v"); done ;;
  esac
done < <("$py" -m pip config list 2>/dev/null || true)
exec "$uv" pip install --python "$py" --quiet "${sources[@]}" "$@"
