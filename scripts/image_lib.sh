# Sourced by scripts/build_base_image.sh and scripts/build_python_image.sh (not run on its own): the
# recipe label that lets a second build with the same inputs exit at once, and the closing report.
# The caller defines `log` first.

# image_is_current IMAGE RECIPE [--force]: true when IMAGE exists with label openenv.recipe=RECIPE
# (never with --force).
image_is_current() {
  [[ "${3:-}" != "--force" ]] || return 1
  [[ "$(docker image inspect "$1" --format '{{ index .Config.Labels "openenv.recipe" }}' 2>/dev/null || true)" == "$2" ]]
}

# report_built IMAGE TAG COMMAND: run COMMAND (version checks) in IMAGE with no network, log its output
# prefixed with [TAG], then the image's size.
report_built() {
  docker run --rm --network none "$1" sh -c "$3" | sed "s/^/[$2] /" >&2
  log "built $1 ($(docker image inspect "$1" --format '{{.Size}}' | awk '{printf "%.0f MB", $1/1e6}'))"
}
