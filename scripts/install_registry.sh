#!/usr/bin/env bash
# Idempotent: the image-registry tools the pull tests use, from Debian: `docker-registry` (Docker's
# distribution 2.8, served on 127.0.0.1 by openenv.testing.registry.LoopbackRegistry), `skopeo` and
# `umoci` (copy and unpack OCI images without a Docker daemon), and `htpasswd` (apache2-utils) for a
# registry that asks for a login. A machine that has them is done in milliseconds. The package's own service is never started (tests run their own registry on loopback);
# on a machine with systemd, `systemctl disable --now docker-registry` if apt started it.
set -euo pipefail
have() { command -v docker-registry && command -v skopeo && command -v umoci && command -v htpasswd; } >/dev/null
have && exit 0
SUDO=""
[[ $(id -u) -ne 0 ]] && SUDO="sudo"
if ! command -v apt-get >/dev/null; then
  echo "[install_registry] docker-registry/skopeo/umoci missing and no apt-get here: install them with your package manager" >&2
  exit 1
fi
echo "[install_registry] installing docker-registry, skopeo, umoci, apache2-utils (Debian)"
apt_install() {
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq \
    --no-install-recommends docker-registry skopeo umoci apache2-utils >/dev/null
}
apt_install 2>/dev/null || { $SUDO apt-get -o DPkg::Lock::Timeout=600 update -qq && apt_install; }
have
