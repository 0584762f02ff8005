"""`__all__` in every openenv.train module names each public class and function, and only names that exist."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import openenv.train

MODULES = sorted(f"openenv.train.{m.name}" for m in pkgutil.iter_modules(openenv.train.__path__))


@pytest.mark.parametrize("name", MODULES)
def test_all_lists_every_public_definition_and_nothing_else(name: str) -> None:
    module = importlib.import_module(name)
    defined = {attr for attr, value in vars(module).items()
               if not attr.startswith("_") and (inspect.isclass(value) or inspect.isfunction(value))
               and value.__module__ == name}
    assert not defined - set(module.__all__), f"{name} leaves public definitions out of __all__"
    assert all(hasattr(module, member) for member in module.__all__)  # type aliases may be listed too


def test_the_package_reexports_only_names_its_modules_export() -> None:
    for member in openenv.train.__all__:
        assert hasattr(openenv.train, member)
