#!/usr/bin/env bash
# The test command (README): the whole suite on the repo's virtualenv. Extra args go to pytest.
# `--extended` first adds the scheduled tier (tests marked `extended`: tests/extended.py), which
# every-commit CI leaves out to stay under 45 minutes on 2 cores.
# Run `scripts/install.sh --all` first (the README's command does): without a prerequisite a test is
# skipped locally (the last line of the run counts the skips and why) and fails in CI.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# The model scripts/install.sh --all built (tests/conftest.py sets the same default).
export OPENENV_TINY_MODEL="${OPENENV_TINY_MODEL:-$PWD/.cache/tiny-model}"
if [ "${1:-}" = "--extended" ]; then
    export OPENENV_EXTENDED=1
    shift
fi
# The whole suite runs pytest twice (below): one vLLM server serves both (tests/conftest.py's vllm_url
# reads its URL from OPENENV_TEST_VLLM_URL_FILE), started here while the first run collects, not one per
# run (a start is ~30 s idle, ~65 s on a loaded 2-core CI machine).
if [ "$#" -eq 0 ] && [ -z "${OPENENV_VLLM_URL:-}" ]; then
    OPENENV_TEST_VLLM_URL_FILE="$(mktemp)"
    export OPENENV_TEST_VLLM_URL_FILE
    .venv/bin/python -m openenv.soak.vllm_server "$OPENENV_TINY_MODEL" --url-file "$OPENENV_TEST_VLLM_URL_FILE" &
    vllm_pid=$!
    trap 'kill "$vllm_pid" 2>/dev/null; wait "$vllm_pid" 2>/dev/null; rm -f "$OPENENV_TEST_VLLM_URL_FILE"' EXIT
fi
.venv/bin/python -m pytest -q -p no:cacheprovider --durations=15 "$@"
# The whole suite (no arguments) also reruns the equivalence suites with every hand-written fast path
# off (OPENENV_FAST_PATHS=0: plain pydantic, tokenizer.encode, httpx; see openenv/capture/fast_paths.py),
# so both ways stay token-exact (about 2 minutes on 2 cores).
if [ "$#" -eq 0 ]; then
    OPENENV_FAST_PATHS=0 .venv/bin/python -m pytest -q -p no:cacheprovider \
        tests/capture/test_session.py tests/capture/test_renderer.py tests/capture/test_fast_paths.py \
        tests/capture/backends/test_vllm.py tests/capture/dialects/test_contract.py \
        tests/capture/dialects/test_sdk_round_trip.py tests/capture/dialects/test_openai_chat.py
fi
