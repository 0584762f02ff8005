#!/usr/bin/env bash
# Install Debian's docker.io and start dockerd in the background, idempotently (root only).
#
# Fast when the engine already answers. Nothing is pulled: no registry is reachable here, and the
# base image is built offline by scripts/build_base_image.sh.
#
#   OPENENV_DOCKERD_LOG   where dockerd logs (default /var/log/openenv-dockerd.log)
set -euo pipefail

LOG="${OPENENV_DOCKERD_LOG:-/var/log/openenv-dockerd.log}"

engine_up() { docker info >/dev/null 2>&1; }

if engine_up; then
  echo "docker: engine already running ($(docker info --format '{{.ServerVersion}}'))"
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "docker: the engine is not running and installing it needs root" >&2
  exit 1
fi

if ! command -v dockerd >/dev/null 2>&1; then
  echo "docker: installing docker.io from Debian"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends docker.io >/dev/null
fi

if ! pgrep -x dockerd >/dev/null 2>&1; then
  echo "docker: starting dockerd (log: $LOG)"
  mkdir -p "$(dirname "$LOG")"
  # Its own session: started from inside a test run (a fixture calling this script), dockerd would share
  # that run's process group and die with it when the run's guard kills the group.
  setsid nohup dockerd >>"$LOG" 2>&1 </dev/null &
fi

for _ in $(seq 1 120); do
  if engine_up; then
    echo "docker: engine ready ($(docker info --format '{{.ServerVersion}}'))"
    exit 0
  fi
  sleep 0.5
done
echo "docker: dockerd did not answer within 60 s; last log lines:" >&2
tail -n 20 "$LOG" >&2 || true
exit 1
