"""Versions besides the pin: `NAME@VERSION` targets, the installer's `NAME@VERSION`, and `--pin` moving a
pin in both places that hold it (spec.yaml and the installer's table) or in neither."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import tarfile
from pathlib import Path
from urllib.parse import unquote

import pytest

from openenv.errors import BadRequest, EnvError, NotFound
from openenv.harness.catalog import get_spec, harness_dir, reload_specs
from openenv.harness.install import cache_root
from openenv.harness.pins import parse_target, scratch_cache, spec_at, write_pin
from openenv.resources import harness_installer


def test_a_bare_name_is_its_pin_and_an_at_version_is_that_version():
    spec, version = parse_target("pi")
    assert (spec.name, version) == ("pi", spec.install.version)
    assert parse_target("pi@0.80.0-beta.1")[1] == "0.80.0-beta.1"


@pytest.mark.parametrize("target", ["pi@1.0;rm -rf /", "pi@", "pi@--registry=http://evil"])
def test_a_version_that_is_not_a_version_is_refused(target):
    if target == "pi@":
        assert parse_target(target)[1] == get_spec("pi").install.version  # empty: the pin
        return
    with pytest.raises(BadRequest, match="is not a version"):
        parse_target(target)


def test_an_unknown_harness_names_the_known_ones():
    with pytest.raises(NotFound, match="known harnesses: .*pi"):
        parse_target("notepad@1.0")


def test_the_checked_version_goes_to_a_scratch_cache_not_the_pinned_one(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENENV_HARNESS_CACHE", str(tmp_path / "harnesses"))
    assert scratch_cache("pi", "9.9.9") == tmp_path / "harness-check" / "pi@9.9.9"
    moved = spec_at(get_spec("pi"), "9.9.9")
    assert moved.install.version == "9.9.9" and get_spec("pi").install.version != "9.9.9"


def _install(
    target: str, env: dict[str, str], *, timeout: float, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """`install_harnesses.sh TARGET`, run with exactly `env`."""
    return subprocess.run(
        ["bash", str(harness_installer()), target],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env=env,
        cwd=cwd,
    )


def test_the_installer_refuses_a_version_with_shell_in_it(tmp_path):
    proc = _install(
        "pi@1;touch pwned",
        {"PATH": "/usr/bin:/bin", "OPENENV_HARNESS_CACHE": str(tmp_path)},
        timeout=60,
        cwd=tmp_path,
    )
    assert proc.returncode != 0 and "is not a version" in proc.stderr
    assert list(tmp_path.iterdir()) == [], "nothing was installed or run"


@pytest.fixture
def own_pins(tmp_path, monkeypatch):
    """pi's env folder and the installer copied, the copy shadowing the shipped pi ($OPENENV_ENVS_PATH)."""
    envs = tmp_path / "envs"
    shutil.copytree(harness_dir("pi"), envs / "pi")
    installer = tmp_path / "install_harnesses.sh"
    shutil.copy(harness_installer(), installer)
    monkeypatch.setenv("OPENENV_ENVS_PATH", str(envs))
    reload_specs()
    yield envs / "pi" / "spec.yaml", installer
    monkeypatch.delenv("OPENENV_ENVS_PATH")
    reload_specs()


def test_pin_moves_the_spec_and_the_installer_row_together(own_pins):
    spec_file, installer = own_pins
    old = get_spec("pi").install.version
    changed = write_pin("pi", "0.99.0", installer=installer)
    assert set(changed) == {spec_file, installer}
    assert get_spec("pi").install.version == "0.99.0", "the catalog reads the new pin"
    rows = subprocess.run(
        ["bash", str(installer), "--pins"], capture_output=True, text=True, check=True
    ).stdout
    [pi_row] = [r.split() for r in rows.splitlines() if r.split()[0] == "pi"]
    assert pi_row[3] == "0.99.0"
    assert old not in spec_file.read_text().split("install:")[1].split("\n")[0]
    other = [r.split() for r in rows.splitlines() if r.split()[0] == "codex"]
    assert other[0][3] == get_spec("codex").install.version, "only pi's row moved"


def test_pin_writes_nothing_when_either_file_lacks_the_pin(own_pins):
    spec_file, installer = own_pins
    installer.write_text(installer.read_text().replace("pi-coding-agent", "pi-agent"))  # hand-edited table
    before = spec_file.read_text()
    with pytest.raises(EnvError, match="does not name pi's pin"):
        write_pin("pi", "0.99.0", installer=installer)
    assert spec_file.read_text() == before


def test_a_version_the_registry_lacks_fails_the_install_and_says_so(registry, tmp_path):
    """Regression: a failed `npm install` of the last step ended the script 0 (errexit is off under `||`)."""
    proc = _install("pi@9.9.9", {**os.environ, "OPENENV_HARNESS_CACHE": str(tmp_path / "cache")}, timeout=120)
    assert proc.returncode == 1 and "failed: pi@9.9.9" in proc.stderr, proc.stderr[-2000:]
    assert any("pi-coding-agent" in unquote(p) for p in registry.seen), "npm asked the stand-in registry"


def _npm_tarball(package_json: dict[str, object], files: dict[str, str]) -> bytes:
    """An npm package's .tgz: everything under `package/`, as `npm pack` lays it out."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for name, text in {"package.json": json.dumps(package_json), **files}.items():
            data = text.encode()
            info = tarfile.TarInfo(f"package/{name}")
            info.size, info.mode = len(data), 0o755
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def test_an_npm_cli_that_needs_a_newer_node_installs_under_that_node(registry, tmp_path):
    """Regression: npm ran openclaw's preinstall with the `node` on PATH (the system's 20), which refused,
    so `install_harnesses.sh all` failed on a machine without Node 24 first on PATH. The runtime the
    installer pins for the CLI (Node 24 here) must be the one its install scripts see."""
    real = cache_root()
    node24, node22 = real / "node24" / "bin" / "node", real / "node22" / "bin" / "node"
    if not (node24.exists() and node22.exists()):
        pytest.skip("Node 22 and 24 are not installed; run scripts/install_harnesses.sh openclaw qwen-code")
    cache, older = tmp_path / "cache", tmp_path / "older"
    (cache / "node24" / "bin").mkdir(parents=True)
    (cache / "node24" / "bin" / "node").symlink_to(node24.resolve())
    older.mkdir()
    # first on PATH: the Node the old installer let npm's scripts run
    (older / "node").symlink_to(node22.resolve())
    refuse_old = "node -e \"process.exit(+process.versions.node.split('.')[0] >= 24 ? 0 : 7)\""
    registry.packages["openclaw"] = ["9.9.9"]
    registry.tarballs[("openclaw", "9.9.9")] = _npm_tarball(
        {
            "name": "openclaw",
            "version": "9.9.9",
            "bin": {"openclaw": "cli.js"},
            "scripts": {"preinstall": refuse_old},
        },
        {"cli.js": "#!/usr/bin/env node\nconsole.log('ok')\n"},
    )
    proc = _install(
        "openclaw@9.9.9",
        {**os.environ, "OPENENV_HARNESS_CACHE": str(cache), "PATH": f"{older}:{os.environ['PATH']}"},
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (cache / "openclaw" / "bin" / "openclaw").exists(), proc.stderr[-2000:]
    assert any("/tarballs/openclaw/9.9.9.tgz" in p for p in registry.seen), (
        "npm fetched the stand-in's tarball"
    )
