#!/usr/bin/env bash
# Build the offline base image for Docker sandboxes: Debian bookworm (minbase) + python3 + Node 22.
#
#   scripts/build_base_image.sh [--force]
#
# No registry is reachable, so nothing is pulled: the root filesystem comes from `debootstrap` (Debian
# packages are reachable) and Node 22 from npm's `node@22` package, then `docker import` makes the image.
# The image carries a recipe label (a hash of this script and the Node version); a second run with the
# same recipe finds the image and exits in well under a second. The rootfs tarball is also cached under
# .cache/docker/, so a fresh engine re-imports it without running debootstrap again.
#
#   OPENENV_BASE_IMAGE      image tag (default openenv/base:latest)
#   OPENENV_DEBIAN_MIRROR   Debian mirror (default http://deb.debian.org/debian)
#   OPENENV_NODE_VERSION    Node version from npm's `node` package (default 22.23.3)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
IMAGE="${OPENENV_BASE_IMAGE:-openenv/base:latest}"
MIRROR="${OPENENV_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
NODE_VERSION="${OPENENV_NODE_VERSION:-22.23.3}"
CACHE="$ROOT/.cache/docker"
PACKAGES="python3,ca-certificates,procps"
SANDBOX_UID=1000

log() { printf '[build_base_image] %s\n' "$*" >&2; }
# shellcheck source=scripts/image_lib.sh
source "$ROOT/scripts/image_lib.sh"

# Bump ROOTFS_VERSION when build_rootfs changes; the image recipe also covers the import options below.
ROOTFS_VERSION=1
ROOTFS_RECIPE="$(echo "$ROOTFS_VERSION $PACKAGES $NODE_VERSION $MIRROR $SANDBOX_UID" | sha256sum | cut -c1-16)"
RECIPE="$( (cat "${BASH_SOURCE[0]}" "$ROOT/scripts/image_lib.sh"; echo "$ROOTFS_RECIPE") | sha256sum | cut -c1-16)"
TARBALL="$CACHE/base-$ROOTFS_RECIPE.tar"

if image_is_current "$IMAGE" "$RECIPE" "${1:-}"; then
  log "$IMAGE is up to date (recipe $RECIPE)"
  exit 0
fi

node_binary() {  # prints the path of a Node $NODE_VERSION binary, installing npm's node package if needed
  local prefix="$CACHE/node-$NODE_VERSION" bin
  bin="$prefix/node_modules/node/bin/node"
  if ! [[ -x "$bin" ]] || [[ "$("$bin" --version 2>/dev/null)" != "v$NODE_VERSION" ]]; then
    log "node@$NODE_VERSION from npm -> $prefix"
    mkdir -p "$prefix"
    npm install --prefix "$prefix" --no-audit --no-fund --loglevel=error "node@$NODE_VERSION" >&2
  fi
  readlink -f "$bin"
}

build_rootfs() {  # build_rootfs DIR: debootstrap + node + a non-root user, trimmed
  local rootfs="$1"
  command -v debootstrap >/dev/null || {
    log "installing debootstrap"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null 2>&1 \
      || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null; }
  }
  log "debootstrap bookworm (minbase + $PACKAGES) from $MIRROR"
  debootstrap --variant=minbase --include="$PACKAGES" bookworm "$rootfs" "$MIRROR" >"$CACHE/debootstrap.log" 2>&1 \
    || { tail -n 30 "$CACHE/debootstrap.log" >&2; return 1; }
  install -m 0755 "$(node_binary)" "$rootfs/usr/local/bin/node"
  echo "openenv:x:$SANDBOX_UID:$SANDBOX_UID:openenv sandbox:/home/openenv:/bin/sh" >>"$rootfs/etc/passwd"
  echo "openenv:x:$SANDBOX_UID:" >>"$rootfs/etc/group"
  install -d -o "$SANDBOX_UID" -g "$SANDBOX_UID" "$rootfs/home/openenv"
  # Trim what a sandbox never reads: apt caches and lists, docs, man pages, locales.
  rm -rf "$rootfs"/var/cache/apt/* "$rootfs"/var/lib/apt/lists/* "$rootfs"/usr/share/doc/* \
    "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* "$rootfs"/var/log/*
  find "$rootfs/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name 'C.*' -exec rm -rf {} + 2>/dev/null || true
}

mkdir -p "$CACHE"
if ! [[ -s "$TARBALL" ]]; then
  [[ "$(id -u)" -eq 0 ]] || { log "debootstrap needs root"; exit 1; }
  work="$(mktemp -d "$CACHE/rootfs.XXXXXX")"
  trap 'rm -rf "$work"' EXIT
  build_rootfs "$work/rootfs"
  tar -C "$work/rootfs" --numeric-owner -cf "$TARBALL.part" .
  mv "$TARBALL.part" "$TARBALL"
  rm -f "$CACHE"/base-*.tar.part
  find "$CACHE" -maxdepth 1 -name 'base-*.tar' ! -name "base-$ROOTFS_RECIPE.tar" -delete
fi

log "docker import -> $IMAGE"
docker import \
  --change "LABEL openenv.recipe=$RECIPE" \
  --change "LABEL openenv.node=$NODE_VERSION" \
  --change "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
  --change "ENV LANG=C.UTF-8" \
  --change "WORKDIR /home/openenv" \
  --change 'CMD ["/bin/sh"]' \
  "$TARBALL" "$IMAGE" >/dev/null
report_built "$IMAGE" build_base_image 'python3 --version && node --version'
