"""`__all__` is exact in every openenv module: it names each public class and function the module
defines, and only names that exist. One walk over the whole package, so a new module is covered the day
it lands (this replaced six tests that each kept a hand-written list of modules)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import openenv

# Not modules of the package's API: the built-in tasks' repos (data: their bugs are the point) and the
# env folders (`openenv/envs` is the repository's `envs/`, each folder its own project).
_NOT_API = ("openenv.harness.tasks.builtin.", "openenv.envs.")

MODULES = sorted(
    m.name
    for m in pkgutil.walk_packages(openenv.__path__, "openenv.")
    if not m.name.startswith(_NOT_API) and m.name != "openenv.harness.tasks.run_tests"
)

# The documented surface of the env layer's packages (README, docs/): exact, not merely complete.
PACKAGE_EXPORTS = {
    "openenv.core": ["Action", "EnvMetadata", "Environment", "Observation", "State"],
    "openenv.server": ["LocalServer", "create_app"],
    "openenv.client": ["AnyAction", "AnyObservation", "AnyState", "EnvClient", "SyncEnvClient"],
}


def _public_definitions(module: object, name: str) -> set[str]:
    return {
        attr
        for attr, value in vars(module).items()
        if not attr.startswith("_")
        and (inspect.isclass(value) or inspect.isfunction(value))
        and value.__module__ == name
    }


@pytest.mark.parametrize("name", MODULES)
def test_all_lists_every_public_definition_and_nothing_else(name: str) -> None:
    module = importlib.import_module(name)
    declared = getattr(module, "__all__", None)
    defined = _public_definitions(module, name)
    if declared is None:  # a package marker or a script defines nothing public
        assert not defined, f"{name} defines public {sorted(defined)} but has no __all__"
        return
    missing = defined - set(declared)
    assert not missing, f"{name} defines public {sorted(missing)} but leaves it out of __all__"
    absent = [member for member in declared if not hasattr(module, member)]
    assert not absent, f"{name}.__all__ names {absent}, which do not exist"
    assert len(declared) == len(set(declared)), f"{name}.__all__ names something twice"


def test_the_walk_covers_every_layer() -> None:
    """Guards the walk itself: were it to find nothing (a moved package), every test above would pass."""
    layers = {name.split(".")[1] for name in MODULES if name.count(".") >= 1}
    assert {"capture", "harness", "server", "client", "core", "train", "eval", "export", "cli"} <= layers
    assert len(MODULES) > 100


@pytest.mark.parametrize("name", sorted(PACKAGE_EXPORTS))
def test_packages_export_exactly_their_documented_names(name: str) -> None:
    module = importlib.import_module(name)
    assert sorted(module.__all__) == sorted(PACKAGE_EXPORTS[name])
