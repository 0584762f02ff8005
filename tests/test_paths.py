"""The one escape check: attacker-chosen keys and names never leave their folder."""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

import pytest

from openenv.errors import BadRequest
from openenv.paths import safe_join, safe_name, safe_relpath, write_atomic

ATTACKS = ["/tmp/x", "../../../../tmp/x", "a/../../x", "a/..", "..", "", "a\\..\\..\\x", "a\x00b", "/", "."]


@pytest.mark.parametrize("key", ATTACKS)
def test_an_escaping_key_is_refused(key: str) -> None:
    with pytest.raises(BadRequest):
        safe_relpath(key)


@pytest.mark.parametrize("key", ATTACKS)
def test_safe_join_refuses_the_same_keys_and_writes_nothing(tmp_path: Path, key: str) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    with pytest.raises(BadRequest):
        safe_join(root, key)


@pytest.mark.parametrize("key", ["a.py", "src/pkg/mod.py", "./a.py", "dir/.hidden", "a..b/c"])
def test_ordinary_keys_pass(tmp_path: Path, key: str) -> None:
    assert safe_join(tmp_path, key) == tmp_path / PurePosixPath(key)


def test_a_symlink_planted_in_the_folder_cannot_carry_a_write_out(tmp_path: Path) -> None:
    root, outside = tmp_path / "ws", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "tests").symlink_to(outside)
    (root / "leak").symlink_to(outside / "file")  # dangling: a write would create it outside
    with pytest.raises(BadRequest, match="symlink"):
        safe_join(root, "tests/test_x.py")
    with pytest.raises(BadRequest, match="symlink"):
        safe_join(root, "leak")
    (root / "inner").symlink_to(root / "sub", target_is_directory=True)  # a link inside is fine
    assert safe_join(root, "inner/a") == root / "inner" / "a"


@pytest.mark.parametrize("name", ["../x", "a/b", ".env", "-rf", "", "a\x00", "x" * 256])
def test_safe_name_refuses_anything_but_one_plain_component(name: str) -> None:
    with pytest.raises(BadRequest, match="task id"):
        safe_name(name, "task id")


def test_write_atomic_replaces_whole_and_leaves_no_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "log.jsonl"
    write_atomic(target, "old\n")
    write_atomic(target, b"new\n")
    assert target.read_text() == "new\n"
    assert os.listdir(target.parent) == ["log.jsonl"]


def test_write_atomic_keeps_the_old_file_when_the_write_fails(tmp_path: Path) -> None:
    target = tmp_path / "log.jsonl"
    write_atomic(target, "old\n")
    with pytest.raises(TypeError):
        write_atomic(target, 12345)  # type: ignore[arg-type]
    assert target.read_text() == "old\n"
    assert os.listdir(tmp_path) == ["log.jsonl"]


@pytest.mark.parametrize("key", ["/tmp/openenv-escape-x", "../../../../tmp/openenv-escape-x", "a/../../x"])
def test_the_local_sandbox_refuses_a_workspace_key_that_escapes(key: str) -> None:
    from openenv.harness.sandbox.local import LocalSandbox

    sandbox = LocalSandbox(network="host")
    try:
        with pytest.raises(BadRequest):
            sandbox.write_files({key: "pwned"})
        assert not Path("/tmp/openenv-escape-x").exists()
        assert not (sandbox.root / "x").exists()
    finally:
        sandbox.close()
