"""Open Interpreter 0.4.3 (`interpreter --stdin`, auto-run) as an openenv environment; everything
harness-specific is in spec.yaml."""

from __future__ import annotations

from openenv.harness.environment import HarnessEnvironment


class OpenInterpreterEnvironment(HarnessEnvironment):
    """Open Interpreter 0.4.3 (`interpreter --stdin`) solving a coding task, one model turn per step."""

    harness = "open-interpreter"
