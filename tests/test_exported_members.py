"""`__all__` is exact for the env-layer modules: it names what each module defines publicly, no more."""

from __future__ import annotations

import importlib
import inspect

import pytest

PACKAGE_EXPORTS = {
    "openenv.core": ["Action", "EnvMetadata", "Environment", "Observation", "State"],
    "openenv.server": ["LocalServer", "create_app"],
    "openenv.client": ["AnyAction", "AnyObservation", "AnyState", "EnvClient", "SyncEnvClient"],
}

MODULES = [
    "openenv.core.types",
    "openenv.core.environment",
    "openenv.core.wire",
    "openenv.server.app",
    "openenv.server.sessions",
    "openenv.server.runner",
    "openenv.server.routes.info",
    "openenv.server.routes.http",
    "openenv.server.routes.ws",
    "openenv.server.routes.deps",
    "openenv.client.env_client",
    "openenv.client.errors",
    "openenv.auto",
    "openenv.gym",
    "openenv.manifest",
    "openenv.validate",
    "openenv.scaffold",
    "openenv.errors",
]


@pytest.mark.parametrize("name", sorted(PACKAGE_EXPORTS))
def test_packages_export_exactly_their_documented_names(name: str) -> None:
    module = importlib.import_module(name)
    assert sorted(module.__all__) == sorted(PACKAGE_EXPORTS[name])
    for member in module.__all__:
        assert hasattr(module, member)


@pytest.mark.parametrize("name", MODULES)
def test_all_lists_every_public_definition_and_nothing_else(name: str) -> None:
    module = importlib.import_module(name)
    defined = {
        attr
        for attr, value in vars(module).items()
        if not attr.startswith("_")
        and (inspect.isclass(value) or inspect.isfunction(value))
        and value.__module__ == name
    }
    missing = defined - set(module.__all__)
    assert not missing, f"{name} defines public {sorted(missing)} but leaves it out of __all__"
    for member in module.__all__:
        assert hasattr(module, member), f"{name}.__all__ names {member!r}, which does not exist"
