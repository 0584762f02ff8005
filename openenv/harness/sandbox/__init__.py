"""Sandboxes: where an episode's harness and verifier run (`Sandbox` protocol, `LocalSandbox`)."""

from __future__ import annotations

from openenv.harness.sandbox.base import CommandResult, HarnessProcess, Limits, ProcessStatus, Sandbox
from openenv.harness.sandbox.local import LocalProcess, LocalSandbox

__all__ = [
    "CommandResult",
    "HarnessProcess",
    "Limits",
    "LocalProcess",
    "LocalSandbox",
    "ProcessStatus",
    "Sandbox",
]
