#!/usr/bin/env bash
# Headless Chromium + chromedriver for the trajectory viewer's browser tests (Debian packages).
# Idempotent: does nothing when both binaries are already on PATH.
set -euo pipefail

if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then
  echo "chromium and chromedriver already installed: $(chromium --version 2>/dev/null | head -1)"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends chromium chromium-driver >/dev/null
echo "installed: $(chromium --version 2>/dev/null | head -1)"
