"""Every capture module's `__all__` is exact: it names what the module defines publicly, nothing else."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import openenv.capture

THEIRS = ("anthropic", "openai_responses", "gemini")  # dialects with their own owners and tests
MODULES = sorted(
    m.name for m in pkgutil.walk_packages(openenv.capture.__path__, "openenv.capture.")
    if not m.ispkg and not any(f".dialects.{d}" in m.name for d in THEIRS)
    and (".parsers." not in m.name or m.name.endswith((".base", ".hermes")))
)


@pytest.mark.parametrize("name", MODULES)
def test_all_is_exact(name: str) -> None:
    module = importlib.import_module(name)
    declared = set(getattr(module, "__all__", ()))
    defined = {k for k, v in vars(module).items() if not k.startswith("_") and
               (inspect.isclass(v) or inspect.isfunction(v)) and v.__module__ == name}
    assert declared >= defined, f"{name} defines but does not export: {sorted(defined - declared)}"
    missing = {k for k in declared if not hasattr(module, k)}
    assert not missing, f"{name} exports names it lacks: {sorted(missing)}"
