"""`stdout_to_stderr`: inside the block nothing reaches stdout, not even a child process; after it, stdout
is the command's again."""

from __future__ import annotations

import subprocess
import sys

PROGRAM = """
import subprocess, sys
from openenv.cli._output import stdout_to_stderr

with stdout_to_stderr():
    print("python print")
    subprocess.run([sys.executable, "-c", "print('child process')"], check=True)
print("the result")
"""


def test_prints_and_child_processes_go_to_stderr_and_stdout_keeps_only_the_result() -> None:
    ran = subprocess.run(
        [sys.executable, "-c", PROGRAM], capture_output=True, text=True, timeout=60, check=True
    )
    assert ran.stdout == "the result\n"
    assert ran.stderr.splitlines() == ["python print", "child process"]


def test_stdout_is_restored_when_the_block_raises() -> None:
    program = """
from openenv.cli._output import stdout_to_stderr

try:
    with stdout_to_stderr():
        raise RuntimeError("boom")
except RuntimeError:
    print("the result")
"""
    ran = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=60, check=True
    )
    assert ran.stdout == "the result\n"
