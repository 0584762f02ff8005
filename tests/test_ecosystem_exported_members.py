"""`__all__` is exact for the ecosystem modules (MCP, publish, viewer, export, eval)."""

from __future__ import annotations

import importlib
import inspect

import pytest

MODULES = [
    "openenv.server.mcp",
    "openenv.publish",
    "openenv.viewer",
    "openenv.viewer.app",
    "openenv.viewer.model",
    "openenv.export",
    "openenv.export.log",
    "openenv.export.dataset",
    "openenv.eval",
    "openenv.eval.episodes",
    "openenv.eval.runner",
    "openenv.eval.report",
    "openenv.eval.tools",
]


@pytest.mark.parametrize("name", MODULES)
def test_all_lists_every_public_definition_and_nothing_else(name: str) -> None:
    module = importlib.import_module(name)
    defined = {attr for attr, value in vars(module).items()
               if not attr.startswith("_") and (inspect.isclass(value) or inspect.isfunction(value))
               and value.__module__ == name}
    assert not defined - set(module.__all__), f"{name} leaves public {sorted(defined - set(module.__all__))} out"
    for member in module.__all__:
        assert hasattr(module, member), f"{name}.__all__ names {member!r}, which does not exist"
