#!/usr/bin/env bash
# Build openenv/python: the offline base image (scripts/build_base_image.sh: Debian bookworm, python3,
# Node 22) plus bubblewrap (the local sandbox's boundary, from Debian's package) and a virtualenv on PATH
# (/opt/venv: pip, setuptools, wheel) whose pip installs from a local wheelhouse only (/opt/wheels:
# openenv's core and proxy dependencies, torch left out). A Dockerfile
# that runs `pip install .` therefore builds here, with no registry: CI builds the root Dockerfile,
# `openenv build HARNESS` env images and `openenv push` Space folders FROM it (BASE_IMAGE build arg).
#
#   scripts/build_python_image.sh [--force]
#
# The wheelhouse is downloaded once on the host (pip download, the host's index) into .cache/docker/.
# The image carries a recipe label (a hash of this script, the base image id and the requirement list);
# a second run with the same recipe exits in well under a second.
#
#   OPENENV_PYTHON_IMAGE   image tag (default openenv/python:latest)
#   OPENENV_BASE_IMAGE     the base (default openenv/base:latest; built first when missing)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
IMAGE="${OPENENV_PYTHON_IMAGE:-openenv/python:latest}"
BASE="${OPENENV_BASE_IMAGE:-openenv/base:latest}"
PY="${OPENENV_PYTHON:-$ROOT/.venv/bin/python}"
CACHE="$ROOT/.cache/docker"

log() { printf '[build_python_image] %s\n' "$*" >&2; }
# shellcheck source=scripts/image_lib.sh
source "$ROOT/scripts/image_lib.sh"

docker image inspect "$BASE" >/dev/null 2>&1 || bash "$ROOT/scripts/build_base_image.sh"

# The requirements: build tools, openenv's core dependencies and its `capture` extra without torch (the
# proxy renders prompts with the tokenizer; an engine such as vLLM samples). Read from pyproject.toml.
REQS="$("$PY" - "$ROOT/pyproject.toml" <<'EOF'
import re, sys, tomllib
project = tomllib.load(open(sys.argv[1], "rb"))["project"]
reqs = ["pip", "setuptools>=68", "wheel", *project["dependencies"], *project["optional-dependencies"]["capture"]]
print("\n".join(sorted(r for r in reqs if re.split(r"[<>=!~;\[ ]", r)[0] != "torch")))
EOF
)"
BASE_ID="$(docker image inspect "$BASE" --format '{{.Id}}')"
RECIPE="$( (cat "${BASH_SOURCE[0]}" "$ROOT/scripts/image_lib.sh"; echo "$BASE_ID"; echo "$REQS"; cat "$ROOT/constraints.txt") | sha256sum | cut -c1-16)"

if image_is_current "$IMAGE" "$RECIPE" "${1:-}"; then
  log "$IMAGE is up to date (recipe $RECIPE)"
  exit 0
fi

DEBS="$CACHE/debs"
if ! compgen -G "$DEBS/bubblewrap_*.deb" >/dev/null; then
  log "apt-get download bubblewrap -> $DEBS"
  mkdir -p "$DEBS"
  fetch() { (cd "$DEBS" && apt-get download bubblewrap 2>&1 | grep -v "unsandboxed as root" >&2 || true); }
  fetch
  compgen -G "$DEBS/bubblewrap_*.deb" >/dev/null || { apt-get update -qq && fetch; }
  compgen -G "$DEBS/bubblewrap_*.deb" >/dev/null || { log "could not download bubblewrap"; exit 1; }
fi
# The wheelhouse depends only on the requirements, not on this script.
WHEELS="$CACHE/wheels-$(echo "$REQS" | cat - "$ROOT/constraints.txt" | sha256sum | cut -c1-16)"
if ! [[ -f "$WHEELS/.complete" ]]; then
  log "downloading the wheelhouse -> $WHEELS"
  rm -rf "$WHEELS" && mkdir -p "$WHEELS"
  echo "$REQS" >"$WHEELS/requirements.txt"
  "$PY" -m pip download --disable-pip-version-check -q --only-binary=:all: -c "$ROOT/constraints.txt" \
    -r "$WHEELS/requirements.txt" -d "$WHEELS" 2> >(grep -v "is ignored: it is neither" >&2)
  touch "$WHEELS/.complete"
  find "$CACHE" -maxdepth 1 -name 'wheels-*' ! -path "$WHEELS" -exec rm -rf {} +
fi

context="$(mktemp -d)"
trap 'rm -rf "$context"' EXIT
ln "$WHEELS"/*.whl "$context/" 2>/dev/null || cp "$WHEELS"/*.whl "$context/"
cp "$DEBS"/*.deb "$context/"
cat >"$context/Dockerfile" <<EOF
FROM $BASE
COPY *.deb /tmp/debs/
RUN dpkg -i /tmp/debs/*.deb >/dev/null && rm -rf /tmp/debs && bwrap --version
COPY *.whl /opt/wheels/
RUN python3 -m venv --without-pip /opt/venv \\
 && /opt/venv/bin/python \$(ls /opt/wheels/pip-*.whl)/pip install -q --no-index --find-links /opt/wheels \\
    pip setuptools wheel
ENV PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \\
    PIP_NO_INDEX=1 PIP_FIND_LINKS=/opt/wheels PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
LABEL openenv.recipe=$RECIPE
EOF
log "docker build -> $IMAGE (offline: --network none)"
docker build -q --network none -t "$IMAGE" "$context" >/dev/null
report_built "$IMAGE" build_python_image 'python --version && pip --version'
