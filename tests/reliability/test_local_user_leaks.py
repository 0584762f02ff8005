"""What other local users can read of our outputs (issue 30, finding 10): `openenv export` wrote the
`0600` trajectories it read as `0644` files. Now every file of an export is `0600` and every folder
`0700`, and a second user (a uid no account has, run with `setpriv`) reads nothing of it."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from openenv.export import read_episode
from openenv.export.dataset import export_episodes

FIXTURE = Path(__file__).parents[1] / "export" / "fixtures" / "pi-oracle.jsonl"
OTHER_UID = 62617


@pytest.mark.parametrize("shape", ["tokens", "messages"])
def test_an_export_of_private_trajectories_stays_private(tmp_path: Path, shape: str, figures) -> None:
    source = tmp_path / "run.jsonl"
    shutil.copy(FIXTURE, source)
    source.chmod(0o600)
    out = tmp_path / "dataset"
    out.mkdir(mode=0o755)
    (tmp_path).chmod(0o755)
    old = os.umask(0o022)  # a usual umask: what made the old export world-readable
    try:
        result = export_episodes([read_episode(source)], out, shape=shape)
    finally:
        os.umask(old)
    modes = {
        str(p.relative_to(out)): p.stat().st_mode & 0o777
        for p in [result.disk_path, *result.disk_path.rglob("*"), result.parquet_path]
    }
    exposed = {name: oct(mode) for name, mode in modes.items() if mode & 0o077}
    read = None
    if os.geteuid() == 0:
        read = subprocess.run(
            [
                "setpriv",
                f"--reuid={OTHER_UID}",
                f"--regid={OTHER_UID}",
                "--clear-groups",
                "head",
                "-c",
                "64",
                str(result.parquet_path),
            ],
            capture_output=True,
            timeout=30,
        )
    figures.record(
        attack=f"another local user reads a {shape} export",
        attacker="local-user",
        blocked=not exposed and (read is None or read.returncode != 0),
    )
    assert not exposed, exposed
    assert [p.name for p in out.iterdir()] and not any(
        p.name.startswith(".") for p in out.iterdir()
    )  # no staging left
    if read is not None:
        assert read.returncode != 0 and not read.stdout, read
