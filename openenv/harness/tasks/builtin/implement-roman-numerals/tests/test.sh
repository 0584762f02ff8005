#!/bin/sh
# Hidden tests: unittest discovery against the workdir; run_tests.py writes /logs/verifier/reward.json.
# -I -S: no PYTHON* variables, no site hooks (sitecustomize, .pth files) planted by the agent.
exec python3 -I -S "${TESTS_DIR:-/tests}/run_tests.py"
