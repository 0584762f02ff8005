"""Who the sandbox's user is inside: a passwd entry of its own, with the login shell the harness would
have outside (codex runs every tool command in the passwd shell and names it to the model)."""

from __future__ import annotations

import os
import pwd
from pathlib import Path

from openenv.harness.sandbox import LocalSandbox
from openenv.harness.sandbox.identity import login_shell


def _executable(root: Path, path: str) -> None:
    target = root / path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("#!/bin/true\n")
    target.chmod(0o755)


def test_the_login_shell_is_the_callers_where_the_sandboxes_system_has_it(tmp_path: Path) -> None:
    own = pwd.getpwuid(os.getuid()).pw_shell
    _executable(tmp_path, own)
    _executable(tmp_path, "/bin/sh")
    assert login_shell(tmp_path) == own


def test_without_the_callers_shell_it_is_bash_then_sh(tmp_path: Path) -> None:
    _executable(tmp_path, "/bin/sh")
    assert login_shell(tmp_path) == "/bin/sh"  # an image with no bash (Alpine): its sh
    _executable(tmp_path, "/bin/bash")
    expected = pwd.getpwuid(os.getuid()).pw_shell if os.getuid() != 0 else "/bin/bash"
    assert login_shell(tmp_path) in {"/bin/bash", expected}


def test_the_sandbox_user_has_the_callers_login_shell_inside() -> None:
    with LocalSandbox() as box:
        result = box.run(["sh", "-c", 'getent passwd "$(id -u)"; whoami'])
    assert result.exit_code == 0, result.output
    entry, user = result.output.splitlines()[:2]
    shell = entry.split(":")[-1]
    assert user == "openenv"
    assert shell == login_shell(), entry
    assert shell != "/bin/sh" or not os.access("/bin/bash", os.X_OK), "dash instead of this host's bash"
