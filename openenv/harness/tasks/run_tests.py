"""Hidden-test runner copied next to the built-in tasks' tests: unittest discovery -> reward.json.

Stdlib only, because it runs inside the sandbox with whatever Python is there.
"""

import json
import os
import sys
import unittest


def main() -> int:
    tests_dir = os.path.dirname(os.path.abspath(__file__))
    workspace = os.environ.get("WORKSPACE", os.getcwd())
    sys.path[:0] = [workspace, tests_dir]
    suite = unittest.defaultTestLoader.discover(tests_dir, pattern="test_*.py", top_level_dir=tests_dir)
    result = unittest.TextTestRunner(verbosity=2, stream=sys.stdout).run(suite)
    failed = len(result.failures) + len(result.errors) + len(result.unexpectedSuccesses)
    reward = {"tests_passed": result.testsRun - failed, "tests_total": result.testsRun}
    reward_dir = os.environ.get("REWARD_DIR", tests_dir)
    with open(os.path.join(reward_dir, "reward.json"), "w") as fh:
        json.dump(reward, fh)
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
