"""`openenv/settings.py`: every `OPENENV_*` variable declared once, one boolean parser, docs/settings.md's table."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from openenv.settings import SETTINGS, flag, markdown_table, parse_flag

REPO = Path(__file__).resolve().parents[1]


def test_the_docs_table_is_the_generated_one() -> None:
    page = (REPO / "docs" / "settings.md").read_text()
    copy = page.split("<!-- settings:start -->\n", 1)[1].split("<!-- settings:end -->", 1)[0]
    assert copy == markdown_table(), (
        "docs/settings.md's table is stale: paste `python -m openenv.settings` into it"
    )


def test_every_variable_the_package_reads_is_declared() -> None:
    declared = {s.name for s in SETTINGS}
    used: dict[str, str] = {}
    for path in (REPO / "openenv").rglob("*.py"):
        for name in re.findall(r"\bOPENENV_[A-Z0-9_]*[A-Z0-9]\b", path.read_text()):
            used.setdefault(name, str(path.relative_to(REPO)))
    missing = {name: where for name, where in used.items() if name not in declared}
    assert not missing, f"declare these in openenv/settings.py: {missing}"
    assert len(declared) == len(SETTINGS), "a variable is declared twice"


def _raw_reads(source: str, names: set[str]) -> list[str]:
    """`os.environ.get("X")`, `os.environ["X"]` and `os.getenv("X")` of any of `names` in `source`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        key = None
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            called = ast.unparse(node.func)
            if called.endswith(("environ.get", "getenv")):
                key = node.args[0].value
        elif isinstance(node, ast.Subscript) and ast.unparse(node.value).endswith("environ"):
            key = node.slice.value if isinstance(node.slice, ast.Constant) else None
        if key in names:
            found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def test_every_boolean_setting_is_read_through_flag() -> None:
    """OPENENV_DOCKER_HARBOR_ROOT was read as `== "1"`, so `true` silently meant off (issue 46)."""
    flags = {s.name for s in SETTINGS if s.kind == "flag"}
    assert _raw_reads(
        'import os\nos.environ.get("OPENENV_X") == "1"\nos.environ["OPENENV_X"]\n', {"OPENENV_X"}
    )
    found = {
        str(p.relative_to(REPO)): hits
        for p in (REPO / "openenv").rglob("*.py")
        if p.name != "settings.py" and (hits := _raw_reads(p.read_text(), flags))
    }
    assert found == {}


def test_the_isolation_setting_documents_every_value_the_code_takes() -> None:
    from typing import get_args

    from openenv.harness.episode_settings import EpisodeSettings

    [isolation] = [s for s in SETTINGS if s.name == "OPENENV_SANDBOX_ISOLATION"]
    taken = {v for v in get_args(EpisodeSettings.model_fields["isolation"].annotation) if isinstance(v, str)}
    taken |= {
        v for arg in get_args(EpisodeSettings.model_fields["isolation"].annotation) for v in get_args(arg)
    }
    assert taken and all(f"`{value}`" in isolation.doc for value in taken), (taken, isolation.doc)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("1", True),
        ("true", True),
        (" YES ", True),
        ("On", True),
        ("0", False),
        ("false", False),
        ("NO", False),
        ("off", False),
        (None, None),
        ("", None),
        ("  ", None),
    ],
)
def test_one_boolean_parser(value: str | None, expected: bool | None) -> None:
    for default in (False, True):
        assert parse_flag("OPENENV_X", value, default) is (default if expected is None else expected)


def test_a_value_that_is_not_a_boolean_is_an_error_naming_the_variable() -> None:
    with pytest.raises(ValueError, match="OPENENV_NO_TOKEN='maybe' is not a boolean"):
        flag("OPENENV_NO_TOKEN", {"OPENENV_NO_TOKEN": "maybe"})


def test_only_declared_flags_are_read() -> None:
    with pytest.raises(KeyError, match="not a declared boolean"):
        flag("OPENENV_VLLM_URL", {})
    with pytest.raises(KeyError):
        flag("OPENENV_UNHEARD_OF", {})


def test_the_three_former_parsers_read_through_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """fast_paths (default on), the env server's security flags, and the harness env's local-without-build:
    each once had its own idea of true (`not in 0/false/no/off`, `in 1/true/yes`, `== "1"`)."""
    from openenv.capture.fast_paths import fast_paths
    from openenv.harness.environment import HarnessEnvironment
    from openenv.server.security import ServerSecurity

    monkeypatch.delenv("OPENENV_FAST_PATHS", raising=False)
    assert fast_paths()
    monkeypatch.setenv("OPENENV_FAST_PATHS", "Off")
    assert not fast_paths()

    read = ServerSecurity.from_environ
    on = read("127.0.0.1", {"OPENENV_NO_TOKEN": "TRUE", "OPENENV_ALLOW_INLINE_TASKS": "on"})
    assert on.token is None and on.allow_inline_tasks
    off = read("127.0.0.1", {"OPENENV_NO_TOKEN": "0", "OPENENV_ALLOW_INLINE_TASKS": "no"})
    assert off.token is not None and not off.allow_inline_tasks

    monkeypatch.setenv("OPENENV_LOCAL_WITHOUT_BUILD", "yes")
    assert HarnessEnvironment("pi").settings.local_without_build_in_effect()
    monkeypatch.setenv("OPENENV_LOCAL_WITHOUT_BUILD", "0")
    assert not HarnessEnvironment("pi").settings.local_without_build_in_effect()
