"""openenv finds what it ships through importlib.resources, and one variable adds env folders."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from openenv.auto import resolve
from openenv.harness.catalog import get_spec, harness_dir, harness_names
from openenv.harness.tasks import builtin_task_ids
from openenv.resources import (
    ENVS_PATH_VAR,
    builtin_tasks_dir,
    env_dirs,
    find_env_dir,
    harness_installer,
    package_path,
    shipped_envs_dir,
)

PACKAGE = Path(__file__).resolve().parents[1] / "openenv"


def test_the_shipped_envs_are_the_package_data_folder_with_every_harness() -> None:
    envs = shipped_envs_dir()
    assert envs == package_path("envs") and envs.is_dir()
    names = harness_names()
    assert {"pi", "codex", "claude-code"} <= set(names)
    assert all((envs / name / "spec.yaml").is_file() for name in names)
    assert (envs / "echo" / "openenv.yaml").is_file()


def test_builtin_tasks_and_the_installer_are_package_data() -> None:
    assert builtin_tasks_dir().is_dir() and builtin_task_ids()
    assert harness_installer().is_file() and harness_installer().read_text().startswith("#!")


def test_an_extra_folder_adds_a_harness_and_shadows_a_shipped_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pi = (shipped_envs_dir() / "pi" / "spec.yaml").read_text()
    for name in ("mine", "pi"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "spec.yaml").write_text(
            pi.replace("name: pi", f"name: {name}").replace("description: ", "description: extra ")
        )
    monkeypatch.setenv(ENVS_PATH_VAR, str(tmp_path))
    assert env_dirs()[0] == tmp_path.resolve() and env_dirs()[-1] == shipped_envs_dir().resolve()
    assert "mine" in harness_names() and "codex" in harness_names()
    assert harness_dir("pi") == tmp_path.resolve() / "pi"
    assert get_spec("mine").name == "mine" and get_spec("pi").description.startswith("extra ")
    assert resolve("codex").target == str(shipped_envs_dir().resolve() / "codex")


@pytest.mark.parametrize("name", ["../pi", "/etc", ".hidden", "", "pi/../codex"])
def test_a_name_is_never_a_path_out_of_the_env_folders(name: str) -> None:
    assert find_env_dir(name, "spec.yaml") is None


def _walks_up_or_imports_testing(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    found = []
    for node in ast.walk(tree):
        # Path(__file__).parents[n] / .parent.parent: a folder above the package (a checkout's root)
        above = (
            isinstance(node, ast.Subscript)
            and isinstance(node.value, ast.Attribute)
            and node.value.attr == "parents"
        ) or (
            isinstance(node, ast.Attribute)
            and node.attr == "parent"
            and isinstance(node.value, ast.Attribute)
            and node.value.attr == "parent"
        )
        if above and "__file__" in ast.dump(node):
            found.append(f"{path.name}:{node.lineno} walks up from __file__")
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("openenv.testing"):
            found.append(f"{path.name}:{node.lineno} imports {node.module}")
    return found


def test_product_code_neither_walks_up_to_a_repository_nor_imports_openenv_testing() -> None:
    product = [
        p
        for p in PACKAGE.rglob("*.py")
        if not {"testing", "envs", "builtin", "template"} & set(p.relative_to(PACKAGE).parts)
    ]
    assert len(product) > 50
    offenders = [hit for path in product for hit in _walks_up_or_imports_testing(path)]
    assert offenders == []


def test_harness_installs_default_outside_roots_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Docker sandboxes mount the installs at the same path and run them as an unprivileged user."""
    import os

    from openenv.harness.install import cache_root

    monkeypatch.delenv("OPENENV_HARNESS_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    assert cache_root() == Path("/var/cache/openenv/harnesses")
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert cache_root() == tmp_path / "openenv" / "harnesses"
    monkeypatch.setenv("OPENENV_HARNESS_CACHE", str(tmp_path / "mine"))
    assert cache_root() == tmp_path / "mine"
