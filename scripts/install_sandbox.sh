#!/usr/bin/env bash
# What the local sandbox needs to wall a harness in: bubblewrap (`bwrap`, Debian's `bubblewrap`), and to
# run a task in its own image without a Docker daemon: skopeo (fetch from a registry) and umoci (unpack).
# Idempotent; a machine that has them is done in milliseconds. Without bwrap, `openenv run` refuses the
# local sandbox and names this script (or `--isolation none`, which runs the harness on the host).
set -euo pipefail
command -v bwrap >/dev/null && command -v skopeo >/dev/null && command -v umoci >/dev/null && exit 0
SUDO=""
[[ $(id -u) -ne 0 ]] && SUDO="sudo"
if ! command -v apt-get >/dev/null; then
  echo "[install] bubblewrap missing and no apt-get here: install it with your package manager" >&2
  exit 1
fi
echo "[install] installing bubblewrap, skopeo and umoci (the local sandbox's isolation and task images)"
pkgs=(bubblewrap skopeo umoci)
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null 2>&1 \
  || { $SUDO apt-get update -qq && $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null; }
command -v bwrap >/dev/null && command -v skopeo >/dev/null && command -v umoci >/dev/null
