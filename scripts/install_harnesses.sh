#!/usr/bin/env bash
# Install the pinned harness CLIs into $OPENENV_HARNESS_CACHE/<name>/ (npm prefixes or Python venvs;
# default /var/cache/openenv/harnesses for root, else ~/.cache/openenv/harnesses). Shipped in the wheel
# as openenv/harness/install_harnesses.sh.
#
#   scripts/install_harnesses.sh [NAME ...|all]   install (idempotent: a pinned install is skipped in ms)
#   scripts/install_harnesses.sh --pins           print "name method package version bin runtime" rows
#
# The pins below are the versions measured in shared/harnesses.md; openenv/harness checks in a test that
# every envs/<name>/spec.yaml names the same version. OPENENV_HARNESS_CACHE overrides the cache folder.
set -euo pipefail

# The default matches openenv.harness.install.cache_root(): root's installs stay out of /root, which the
# unprivileged user of a Docker sandbox cannot enter.
if [[ $(id -u) -eq 0 ]]; then DEFAULT_CACHE=/var/cache/openenv/harnesses
else DEFAULT_CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/openenv/harnesses"; fi
CACHE="${OPENENV_HARNESS_CACHE:-$DEFAULT_CACHE}"
NODE22_VERSION="22.23.3"

# The last column is the runtime: for npm, which Node.js runs the CLI (system or 22); for pip, which
# Python makes the venv (- is the system python3; 3.12 is python3.12 from PATH or pyenv).
# name          method  package                          version   bin      runtime
PINS="
claude-code     npm     @anthropic-ai/claude-code        2.1.332   claude   system
codex           npm     @openai/codex                    0.171.0   codex    system
opencode        npm     opencode-ai                      1.18.33   opencode system
gemini-cli      npm     @google/gemini-cli               0.61.0    gemini   22
pi              npm     @mariozechner/pi-coding-agent    0.73.1    pi       system
qwen-code       npm     @qwen-code/qwen-code             0.24.4    qwen     22
mini-swe-agent  pip     mini-swe-agent                   2.4.6     mini     -
hermes          pip     hermes-agent                     0.19.0    hermes   -
copilot         npm     @github/copilot                  1.0.102   copilot  system
cline           npm     cline                            3.0.65    cline    system
openhands       pip     openhands                        1.16.0    openhands 3.12
kilo            npm     @kilocode/cli                    7.7.7     kilo     system
continue        npm     @continuedev/cli                 1.5.47    cn       system
grok-cli        npm     @vibe-kit/grok-cli               0.0.34    grok     system
kimi-cli        pip     kimi-cli                         1.51.0    kimi     3.13
terminus-2      pip     harbor                           0.26.0    python   3.12
nanocoder       npm     @nanocollective/nanocoder        1.30.0    nanocoder 22
gptme           pip     gptme                            0.35.1    gptme    -
mistral-vibe    pip     mistral-vibe                     3.0.2     vibe     3.12
"

log() { printf '[install_harnesses] %s\n' "$*" >&2; }

pin_row() {  # pin_row NAME -> "method package version bin node"
  awk -v n="$1" '$1 == n { print $2, $3, $4, $5, $6 }' <<<"$PINS"
}

installed_npm_version() {  # installed_npm_version PREFIX PACKAGE
  local manifest="$1/lib/node_modules/$2/package.json"
  [[ -f "$manifest" ]] || return 0
  sed -n 's/^[[:space:]]*"version":[[:space:]]*"\([^"]*\)".*/\1/p' "$manifest" | head -n1
}

install_node22() {
  local prefix="$CACHE/node22"
  if [[ -x "$prefix/bin/node" ]] && [[ "$("$prefix/bin/node" --version)" == "v$NODE22_VERSION" ]]; then
    return 0
  fi
  log "node@$NODE22_VERSION -> $prefix"
  mkdir -p "$prefix"
  npm install --prefix "$prefix" --no-audit --no-fund --loglevel=error "node@$NODE22_VERSION" >&2
  local bin
  for bin in "$prefix/node_modules/node/bin/node" "$prefix/node_modules/.bin/node"; do
    if [[ -x "$bin" ]] && "$bin" --version >/dev/null 2>&1; then
      mkdir -p "$prefix/bin"
      ln -sf "$(readlink -f "$bin")" "$prefix/bin/node"
      return 0
    fi
  done
  log "node@$NODE22_VERSION installed but no runnable node binary was found under $prefix"
  return 1
}

install_npm() {  # install_npm NAME PACKAGE VERSION NODE
  local prefix="$CACHE/$1"
  if [[ "$(installed_npm_version "$prefix" "$2")" == "$3" ]]; then
    log "$1 $3 already installed"
    return 0
  fi
  if [[ "$4" == "22" ]]; then install_node22; fi
  log "$1: npm $2@$3 -> $prefix"
  mkdir -p "$prefix"
  npm install -g --prefix "$prefix" --no-audit --no-fund --loglevel=error "$2@$3" >&2
}

find_python() {  # find_python VERSION -> the path of a python of that minor version ("-": python3)
  if [[ "$1" == "-" ]]; then command -v python3; return; fi
  local candidate root="${PYENV_ROOT:-$HOME/.pyenv}"
  # A pyenv shim for a version that is not selected exits 127, so try the interpreters themselves first.
  for candidate in "$root"/versions/"$1".*/bin/python"$1" "$(command -v "python$1" || true)"; do
    if [[ -x "$candidate" ]] && "$candidate" -c 'pass' 2>/dev/null; then echo "$candidate"; return 0; fi
  done
  log "no python$1 found (on PATH or under $root/versions); install it, e.g. \`pyenv install $1\`"
  return 1
}

install_pip() {  # install_pip NAME PACKAGE VERSION PYTHON
  local prefix="$CACHE/$1" python
  # The dist-info folder names the installed version (much faster than `pip show`).
  if [[ -x "$prefix/bin/python" ]] && compgen -G "$prefix/lib/python*/site-packages/${2//-/_}-$3.dist-info" >/dev/null; then
    log "$1 $3 already installed"
    return 0
  fi
  python="$(find_python "${4:--}")" || return 1
  log "$1: pip $2==$3 -> $prefix ($("$python" --version))"
  "$python" -m venv "$prefix"
  "$prefix/bin/python" -m pip install --quiet --disable-pip-version-check "$2==$3" >&2
}

# Debian packages a harness needs at run time besides its own install ("name:pkg,pkg"); installed with
# apt-get when the command is missing (terminus-2 types into tmux).
DEBS="terminus-2:tmux"

ensure_debs() {  # ensure_debs NAME
  local entry pkg missing=()
  entry="$(tr ' ' '\n' <<<"$DEBS" | awk -F: -v n="$1" '$1 == n { print $2 }')"
  for pkg in ${entry//,/ }; do
    command -v "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
  done
  [[ ${#missing[@]} -eq 0 ]] && return 0
  if [[ $(id -u) -ne 0 ]]; then
    log "$1 needs ${missing[*]}: install it (apt-get install ${missing[*]})"
    return 1
  fi
  log "$1 needs ${missing[*]}: apt-get install"
  apt-get install -y -q "${missing[@]}" >&2 || { apt-get update -q >&2 && apt-get install -y -q "${missing[@]}" >&2; }
}

install_one() {
  local row method package version bin node
  row="$(pin_row "$1")"
  if [[ -z "$row" ]]; then
    log "unknown harness '$1'; known: $(awk 'NF { printf "%s ", $1 }' <<<"$PINS")"
    return 2
  fi
  read -r method package version bin node <<<"$row"
  ensure_debs "$1" || return 1
  case "$method" in
    npm) install_npm "$1" "$package" "$version" "$node" ;;
    pip) install_pip "$1" "$package" "$version" "$node" ;;
  esac
}

main() {
  if [[ "${1:-}" == "--pins" ]]; then
    awk 'NF' <<<"$PINS"
    return 0
  fi
  local names=("$@")
  if [[ ${#names[@]} -eq 0 || "${names[0]}" == "all" ]]; then
    mapfile -t names < <(awk 'NF { print $1 }' <<<"$PINS")
  fi
  local name failed=()
  for name in "${names[@]}"; do
    install_one "$name" || failed+=("$name")
  done
  if [[ ${#failed[@]} -gt 0 ]]; then
    log "failed: ${failed[*]}"
    return 1
  fi
}

main "$@"
