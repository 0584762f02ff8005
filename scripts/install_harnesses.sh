#!/usr/bin/env bash
# Install the pinned harness CLIs into $OPENENV_HARNESS_CACHE/<name>/ (npm prefixes or Python venvs;
# default /var/cache/openenv/harnesses for root, else ~/.cache/openenv/harnesses). Shipped in the wheel
# as openenv/harness/install_harnesses.sh.
#
#   scripts/install_harnesses.sh [NAME ...|all]   install (idempotent: a pinned install is skipped in ms)
#   scripts/install_harnesses.sh NAME@VERSION      install another version (e.g. into a scratch cache)
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
# The Node.js each newer-Node runtime column names, installed from the npm registry's `node` package.
NODE_VERSIONS="22:22.23.3 24:24.21.0"

# The last column is the runtime: for npm, which Node.js runs the CLI (system, 22 or 24); for pip, which
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
openclaw        npm     openclaw                         2026.9.6  openclaw 24
aider           pip     aider-chat                       0.86.2    aider    -
codebuddy       pip     codebuddy-agent-sdk              0.3.274   codebuddy -
cecli           pip     cecli-dev                        1.10.0    cecli    -
qwen-code-termux npm    @mmmbuto/qwen-code-termux       0.6.402   qwen     22
open-interpreter pip    open-interpreter                 0.4.3     python   -
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

install_node() {  # install_node MAJOR: $CACHE/nodeMAJOR/bin/node at the version NODE_VERSIONS pins
  local major="$1" version prefix
  version="$(tr ' ' '\n' <<<"$NODE_VERSIONS" | awk -F: -v m="$major" '$1 == m { print $2 }')"
  if [[ -z "$version" ]]; then log "no Node.js $major in NODE_VERSIONS ($NODE_VERSIONS)"; return 1; fi
  prefix="$CACHE/node$major"
  if [[ -x "$prefix/bin/node" ]] && [[ "$("$prefix/bin/node" --version)" == "v$version" ]]; then
    return 0
  fi
  log "node@$version -> $prefix"
  mkdir -p "$prefix"
  npm install --prefix "$prefix" --no-audit --no-fund --loglevel=error "node@$version" >&2
  local bin
  for bin in "$prefix/node_modules/node/bin/node" "$prefix/node_modules/.bin/node"; do
    if [[ -x "$bin" ]] && "$bin" --version >/dev/null 2>&1; then
      mkdir -p "$prefix/bin"
      ln -sf "$(readlink -f "$bin")" "$prefix/bin/node"
      return 0
    fi
  done
  log "node@$version installed but no runnable node binary was found under $prefix"
  return 1
}

install_npm() {  # install_npm NAME PACKAGE VERSION NODE
  local prefix="$CACHE/$1"
  # The runtime first (a no-op when it is there): a harness installed before its Node still needs it.
  if [[ "$4" != "system" ]]; then install_node "$4" || return 1; fi
  if [[ "$(installed_npm_version "$prefix" "$2")" == "$3" ]]; then
    log "$1 $3 already installed"
    return 0
  fi
  log "$1: npm $2@$3 -> $prefix"
  mkdir -p "$prefix"
  # npm runs a package's install scripts with the `node` on PATH, not its own: a CLI that needs a newer
  # Node checks it there (openclaw's preinstall refuses Node 20), so its own runtime goes first.
  local path="$PATH"
  if [[ "$4" != "system" ]]; then path="$CACHE/node$4/bin:$PATH"; fi
  PATH="$path" npm install -g --prefix "$prefix" --no-audit --no-fund --loglevel=error "$2@$3" >&2
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

# A pip harness runs in Docker sandboxes too, where the harness cache is mounted (at its own path) and
# nothing else of this machine is: a venv whose interpreter lives elsewhere (pyenv under /root, the
# official image's /usr/local) cannot start there ("exec: no such file"). So every venv runs on a copy of
# its interpreter under $CACHE/python/VERSION: the executable (its library path made relative with
# patchelf, `$ORIGIN/../lib`), libpython and the standard library, without site-packages, the test suite
# or static libraries. Debian's own /usr/bin/python3.X (which the offline base image has too) is used as is.
ensure_patchelf() {
  command -v patchelf >/dev/null 2>&1 && return 0
  if [[ $(id -u) -ne 0 ]]; then
    log "patchelf is needed to copy a Python into $CACHE/python: install it (apt-get install patchelf)"
    return 1
  fi
  log "installing patchelf (apt-get)"
  apt-get install -y -q patchelf >&2 || { apt-get update -q >&2 && apt-get install -y -q patchelf >&2; }
}

portable_python() {  # portable_python PYTHON -> an executable of the same Python that Docker sandboxes can run
  local info base ver full exe libdir ldlib runtime part
  info="$("$1" -c 'import os, sys, sysconfig as s; print(sys.base_prefix, "%d.%d" % sys.version_info[:2], sys.version.split()[0], os.path.realpath(sys._base_executable), s.get_config_var("LIBDIR") or "-", s.get_config_var("LDLIBRARY") or "-")')" || return 1
  read -r base ver full exe libdir ldlib <<<"$info"
  if [[ "$base" == /usr && -x "/usr/bin/python$ver" ]]; then echo "/usr/bin/python$ver"; return 0; fi
  runtime="$CACHE/python/$full"
  if [[ -x "$runtime/bin/python$ver" ]] && "$runtime/bin/python$ver" -c pass 2>/dev/null; then
    echo "$runtime/bin/python$ver"; return 0
  fi
  ensure_patchelf || return 1
  log "python $full ($base) -> $runtime (a copy Docker sandboxes can run)"
  part="$runtime.part.$$"
  rm -rf "$part"
  mkdir -p "$part/bin" "$part/lib"
  install -m 0755 "$exe" "$part/bin/python$ver"
  ln -s "python$ver" "$part/bin/python3"
  ln -s "python$ver" "$part/bin/python"
  tar -C "$base/lib" --exclude="python$ver/site-packages/*" --exclude="python$ver/test" --exclude='*.a' \
    -cf - "python$ver" | tar -C "$part/lib" -xf -
  if [[ "$ldlib" == *.so* && -e "$libdir/$ldlib" ]]; then
    cp -a "$libdir"/"${ldlib%%.so*}".so* "$part/lib/"
    patchelf --set-rpath '$ORIGIN/../lib' "$part/bin/python$ver"
  fi
  chmod -R a+rX "$part"
  # The copy must find its own prefix and load its own libpython (sys.prefix is found from the executable).
  if ! "$part/bin/python$ver" -c "import sys, ssl, sqlite3, ctypes, venv; assert sys.prefix == '$part', sys.prefix" >&2; then
    log "the copy of python $full at $part does not run on its own"
    return 1
  fi
  rm -rf "$runtime"
  mv "$part" "$runtime"
  echo "$runtime/bin/python$ver"
}

venv_home() { sed -n 's/^home = //p' "$1/pyvenv.cfg" 2>/dev/null; }

repoint_venv() {  # repoint_venv PREFIX: make an existing venv run on its interpreter's portable copy
  local prefix="$1" home python ver
  home="$(venv_home "$prefix")"
  [[ -n "$home" ]] || return 0
  [[ "$home" == "$CACHE"/python/* || "$home" == /usr/bin ]] && return 0
  python="$(portable_python "$home/python3")" || return 1
  ver="$(basename "$python")"; ver="${ver#python}"
  log "$(basename "$prefix"): venv re-pointed from $home to $(dirname "$python")"
  local link
  for link in python python3 "python$ver"; do ln -sfn "$python" "$prefix/bin/$link"; done
  sed -i -e "s|^home = .*|home = $(dirname "$python")|" -e "s|^executable = .*|executable = $python|" \
    -e "s|^command = .*|command = $python -m venv $prefix|" "$prefix/pyvenv.cfg"
  "$prefix/bin/python" -c 'import sys; assert sys.prefix != sys.base_prefix' || return 1
}

install_pip() {  # install_pip NAME PACKAGE VERSION PYTHON
  local prefix="$CACHE/$1" python
  # The dist-info folder names the installed version (much faster than `pip show`).
  if [[ -x "$prefix/bin/python" ]] && compgen -G "$prefix/lib/python*/site-packages/${2//-/_}-$3.dist-info" >/dev/null; then
    repoint_venv "$prefix" || return 1
    log "$1 $3 already installed"
    return 0
  fi
  python="$(find_python "${4:--}")" || return 1
  python="$(portable_python "$python")" || return 1
  log "$1: pip $2==$3 -> $prefix ($("$python" --version))"
  "$python" -m venv "$prefix"
  bash "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/pip_install.sh" "$prefix/bin/python" "$2==$3" >&2
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

# Debian packages a harness runs inside Docker sandboxes, where only the harness cache is mounted: they
# are unpacked under $CACHE/NAME/debs and linked into $CACHE/NAME/bin (first on the harness's PATH), their
# library path made relative with patchelf. The offline base image and Harbor task images lack them.
# "name:command=package,library-package,..."
# (openhands falls back to a plain subprocess terminal without tmux: given one, it works as on the host.)
PORTABLE_DEBS="terminus-2:tmux=tmux,libevent-core-2.1-7,libutempter0 openhands:tmux=tmux,libevent-core-2.1-7,libutempter0"

portable_debs() {  # portable_debs NAME
  local entry command packages root bin pkg
  entry="$(tr ' ' '\n' <<<"$PORTABLE_DEBS" | awk -F: -v n="$1" '$1 == n { print $2 }')"
  [[ -n "$entry" ]] || return 0
  command="${entry%%=*}"; packages="${entry#*=}"
  root="$CACHE/$1/debs"
  bin="$root/usr/bin/$command"
  if [[ -x "$bin" ]] && "$bin" -V >/dev/null 2>&1 && [[ -L "$CACHE/$1/bin/$command" ]]; then return 0; fi
  ensure_patchelf || return 1
  log "$1: $command for Docker sandboxes (apt-get download ${packages//,/ }) -> $root"
  local work; work="$(mktemp -d)"
  ( cd "$work" && apt-get download ${packages//,/ } >&2 ) \
    || ( apt-get update -q >&2 && cd "$work" && apt-get download ${packages//,/ } >&2 ) || { rm -rf "$work"; return 1; }
  rm -rf "$root"; mkdir -p "$root"
  for pkg in "$work"/*.deb; do dpkg-deb -x "$pkg" "$root"; done
  rm -rf "$work"
  local libs; libs="$(cd "$root/usr/lib" && ls -d ./*-linux-gnu* 2>/dev/null | head -n1)"
  patchelf --set-rpath "\$ORIGIN/../lib/${libs#./}" "$bin"
  chmod -R a+rX "$root"
  ln -sfn "$bin" "$CACHE/$1/bin/$command"
  "$CACHE/$1/bin/$command" -V >&2
}

# Executables a pip package ships inside site-packages rather than as a console script, linked into the
# venv's bin/ ("name:bin=path under site-packages"): the CodeBuddy Code binary rides in its Python SDK.
BIN_LINKS="codebuddy:codebuddy=codebuddy_agent_sdk/bin/codebuddy-headless"

link_bins() {  # link_bins NAME
  local entry bin target site
  entry="$(tr ' ' '\n' <<<"$BIN_LINKS" | awk -F: -v n="$1" '$1 == n { print $2 }')"
  [[ -n "$entry" ]] || return 0
  bin="${entry%%=*}"
  site="$(compgen -G "$CACHE/$1/lib/python*/site-packages" | head -n1)"
  target="$site/${entry#*=}"
  if [[ ! -f "$target" ]]; then log "$1: $target is missing from the install"; return 1; fi
  chmod a+rx "$target"
  ln -sfn "$target" "$CACHE/$1/bin/$bin"
}

install_one() {  # install_one NAME[@VERSION]: the pin, or another version (`openenv harness check`)
  local row method package version bin node name="${1%%@*}" wanted=""
  [[ "$1" == *@* ]] && wanted="${1#*@}"
  row="$(pin_row "$name")"
  if [[ -z "$row" ]]; then
    log "unknown harness '$name'; known: $(awk 'NF { printf "%s ", $1 }' <<<"$PINS")"
    return 2
  fi
  read -r method package version bin node <<<"$row"
  if [[ -n "$wanted" ]]; then
    if [[ ! "$wanted" =~ ^[A-Za-z0-9][A-Za-z0-9.+_-]*$ ]]; then
      log "'$wanted' is not a version (e.g. $version)"
      return 2
    fi
    version="$wanted"
  fi
  ensure_debs "$name" || return 1
  # `|| return 1`: called under `||` in main, errexit is off in here, so a failed npm/pip must say so itself.
  case "$method" in
    npm) install_npm "$name" "$package" "$version" "$node" || return 1 ;;
    pip) { install_pip "$name" "$package" "$version" "$node" && link_bins "$name"; } || return 1 ;;
  esac
  portable_debs "$name"
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
