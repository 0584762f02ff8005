"""Hidden-test runner of the built-in tasks, staged as each one's tests/run_tests.py by `builtin_task`:
unittest discovery -> /logs/verifier/reward.json.

Stdlib only, because it runs inside the sandbox with whatever Python is there. Started as
`python3 -I -S` from the workdir: the workspace is searched for the modules under test only *after*
the standard library, so a planted `json.py` or `unittest.py` cannot replace them, no site hook
(`sitecustomize.py`, `.pth`) runs, and compiled caches (`__pycache__`) in the workspace are removed
first, so a planted `.pyc` cannot stand in for the source it claims to be. Code under test still runs in this process;
see docs/reward-integrity.md ("What a task's tests must guard against").
"""

import json
import os
import shutil
import sys
import unittest


def main() -> int:
    tests_dir = os.path.dirname(os.path.abspath(__file__))
    workspace = os.environ.get("WORKSPACE", os.getcwd())
    sys.path[:] = [tests_dir, *[p for p in sys.path if p], workspace]
    sys.dont_write_bytecode = True
    for folder, dirs, _ in os.walk(workspace):  # a planted .pyc could stand in for an innocent-looking .py
        if "__pycache__" in dirs:
            dirs.remove("__pycache__")
            shutil.rmtree(os.path.join(folder, "__pycache__"), ignore_errors=True)
    suite = unittest.defaultTestLoader.discover(tests_dir, pattern="test_*.py", top_level_dir=tests_dir)
    result = unittest.TextTestRunner(verbosity=2, stream=sys.stdout).run(suite)
    failed = len(result.failures) + len(result.errors) + len(result.unexpectedSuccesses)
    reward = {"tests_passed": result.testsRun - failed, "tests_total": result.testsRun}
    reward_dir = os.environ.get("REWARD_DIR", "/logs/verifier")
    with open(os.path.join(reward_dir, "reward.json"), "w") as fh:
        json.dump(reward, fh)
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
