"""Runs Open Interpreter's own CLI (`interpreter --stdin`) with the task's instruction as its one message.

The CLI's headless mode is `--stdin`, which reads the message with one `input()` call: a single line, and
every sandbox gives the harness /dev/null on stdin. This launcher (copied into the episode's HOME by the
spec) answers that one `input()` with the whole instruction, newlines included, then hands over to the
unmodified entry point (`interpreter.terminal_interface.start_terminal_interface:main`) with the rest of
its argv. Nothing else of Open Interpreter is touched.
"""

from __future__ import annotations

import builtins
import sys


def main() -> int:
    argv = sys.argv[1:]
    if "--instruction" not in argv or argv.index("--instruction") + 1 >= len(argv):
        print("usage: oi_launcher.py --instruction TEXT [interpreter options]", file=sys.stderr)
        return 2
    at = argv.index("--instruction")
    instruction = argv[at + 1]
    del argv[at : at + 2]
    answers = [instruction]

    def first_input(prompt: object = "") -> str:
        if answers:
            return answers.pop()
        raise EOFError("stdin is closed")  # any later question (none under --stdin) sees end of input

    builtins.input = first_input
    sys.argv = ["interpreter", "--stdin", *argv]
    from interpreter.terminal_interface.start_terminal_interface import main as interpreter_main

    interpreter_main()
    return 0


if __name__ == "__main__":
    sys.exit(main())
