"""`__all__` is exact in every openenv.harness module: it names what exists, and every public def/class."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import openenv.harness

# Docker-only modules need the docker SDK; they are checked where it is installed.
MODULES = sorted(
    m.name for m in pkgutil.walk_packages(openenv.harness.__path__, "openenv.harness.")
    if ".builtin" not in m.name and not m.name.endswith("run_tests")
)


@pytest.mark.parametrize("name", MODULES)
def test_all_is_exact(name):
    try:
        module = importlib.import_module(name)
    except ImportError as exc:
        pytest.skip(f"{name}: {exc}")
    exported = getattr(module, "__all__", None)
    if exported is None:
        pytest.skip(f"{name} has no __all__ (a package marker)")
    missing = [n for n in exported if not hasattr(module, n)]
    defined = {
        n for n, obj in vars(module).items()
        if not n.startswith("_") and (inspect.isfunction(obj) or inspect.isclass(obj))
        and getattr(obj, "__module__", None) == name
    }
    assert missing == [] and sorted(defined - set(exported)) == []
