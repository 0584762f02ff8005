"""Who the sandbox's user is inside: a passwd entry of its own, with bash as its login shell where the
system it sees has bash, as root has in Harbor's task images (codex runs every tool command in the
passwd shell and names it to the model)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from openenv.harness.sandbox import LocalSandbox
from openenv.harness.sandbox.identity import login_shell


def _executable(root: Path, path: str) -> None:
    target = root / path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("#!/bin/true\n")
    target.chmod(0o755)


def test_the_login_shell_is_bash_where_the_system_has_it_else_sh(tmp_path: Path) -> None:
    _executable(tmp_path, "/bin/sh")
    assert login_shell(tmp_path) == "/bin/sh"  # an image without bash (Alpine)
    _executable(tmp_path, "/bin/bash")
    assert login_shell(tmp_path) == "/bin/bash"


@pytest.mark.skipif(not os.access("/bin/bash", os.X_OK), reason="this host has no /bin/bash")
def test_the_sandbox_user_has_bash_inside_not_dash() -> None:
    with LocalSandbox() as box:
        result = box.run(["sh", "-c", 'getent passwd "$(id -u)"; whoami'])
        shell = 'exec "$(getent passwd "$(id -u)" | cut -d: -f7)" -c \'echo "$BASH_VERSION"\''
        login = box.run(["sh", "-c", shell])
    assert result.exit_code == 0, result.output
    entry, user = result.output.splitlines()[:2]
    assert user == "openenv"
    assert entry.split(":")[-1] == "/bin/bash", entry
    assert login.exit_code == 0 and login.output.strip(), login.output  # it runs inside, and is bash
