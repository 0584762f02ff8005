#!/usr/bin/env bash
# Idempotent: the reference OpenEnv, openenv==0.10.0 from PyPI (Hugging Face's OpenEnv), in a virtualenv
# of its own at .cache/reference-venv, for the interop tests (tests/interop/): the reference's own
# clients drive our servers and our client drives the reference's servers; and for the benchmark
# (bench/bench_server.py serves it on both asyncio stacks, so uvloop and httptools at the versions in
# constraints.txt come along). Its import package is also named `openenv`, so it can never share a venv
# with ours; tests run its interpreter with -I from a folder outside the checkout.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${OPENENV_REFERENCE_VENV:-$here/.cache/reference-venv}"
version=0.10.0
say() { printf '\033[1m[install_reference]\033[0m %s\n' "$*"; }
pins=("openenv==$version" $(grep -E '^(uvloop|httptools)==' "$here/constraints.txt"))
# TRL's harness trainer (tests/interop/test_harbor_trl.py) imports the reference, so it lives here too; torch
# first, the CPU build at our pin (pip takes the local file; a bare `torch` would pull a CUDA build).
torch_pin="torch==$(grep -E '^torch==' "$here/constraints.txt" | sed -E 's/^torch==([0-9.]+).*/\1/')"
trl_pin="$(grep -E '^trl==' "$here/constraints.txt")"
check() { (cd / && "$venv/bin/python" -I -c "import importlib.metadata as m; assert m.version('openenv') == '$version'; import uvloop, httptools, openenv.core.generic_client, openenv.core.mcp_client, openenv.harbor.client; import trl.experimental.async_grpo.openenv_harness") 2>/dev/null; }
if [[ -x "$venv/bin/python" ]] && check; then
  say "openenv $version (reference) ready in $venv"
  exit 0
fi
py=""
for candidate in python3.12 python3.11 python3; do
  if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c 'import sys; assert sys.version_info >= (3, 11)' 2>/dev/null; then
    py="$candidate"; break
  fi
done
[[ -n "$py" ]] || { say "no python >= 3.11 on PATH"; exit 1; }
say "installing ${pins[*]} (the reference) into $venv (python: $py)"
[[ -x "$venv/bin/python" ]] || "$py" -m venv "$venv"
# scripts/pip_install.sh: uv when install.sh put one (OPENENV_UV), else pip; from / so that no `openenv` folder
# of ours is on the path.
(cd / && bash "$here/scripts/pip_install.sh" "$venv/bin/python" "${pins[@]}")
say "installing $torch_pin and $trl_pin (TRL's harness trainer) into $venv"
(cd / && bash "$here/scripts/pip_install.sh" "$venv/bin/python" "$torch_pin")
(cd / && bash "$here/scripts/pip_install.sh" "$venv/bin/python" -c "$here/constraints.txt" "$trl_pin")
check || { say "the reference installed but does not import from $venv"; exit 1; }
say "openenv $version (reference) ready"
