"""Who a sandbox's processes are on this host, and who else may see their folders.

Both sandboxes run the agent under a uid of their own. That uid must belong to **no** host account: a
real user with the same uid (the red-team found uid 1000 was `cloudsdk` here) could write into the
workspace and the reward folder, and read or trace the harness's processes, during an episode. So the
uid is checked against the host's account database when a sandbox starts, and refused when taken.

A sandbox's root folder is `0700` and owned by the user running openenv: other local users cannot
traverse it, so the session token in the harness config, the solution, the workspace and the logs are
theirs to read only through the sandbox's own mounts (bubblewrap and Docker make those as root).
"""

from __future__ import annotations

import os
import pwd
from pathlib import Path

from openenv.errors import EnvError

__all__ = ["ROOT_MODE", "SANDBOX_USER", "check_free_uid", "login_shell", "private_root", "write_identity"]

ROOT_MODE = 0o700
SANDBOX_USER = "openenv"  # the sandbox's account: its passwd entry, and $USER


def check_free_uid(uid: int, *, what: str, variable: str) -> None:
    """Refuse `uid` when a host account has it (root and the caller's own uid are the caller's choice).

    Raises:
        EnvError: naming the account and the variable that picks another uid.
    """
    if uid in (0, os.geteuid()):
        return
    try:
        account = pwd.getpwuid(uid).pw_name
    except KeyError:
        return
    raise EnvError(
        f"{what} uid {uid} belongs to the host account {account!r}: that user could read and write the "
        f"sandbox's files and trace its processes; set {variable} to a uid no host account has"
    )


def private_root(path: Path) -> Path:
    """Make `path` (a sandbox root) reachable by its owner only."""
    path.chmod(ROOT_MODE)
    return path


def login_shell(system: Path = Path("/")) -> str:
    """The login shell the sandbox's user gets: `/bin/bash` where `system` (the root the sandbox sees:
    this host's, or an unpacked image's) has it, as root has in Harbor's Debian task images; else
    `/bin/sh` (an Alpine image).

    Harnesses run their tool commands in it: codex reads it from passwd, ignoring $SHELL, and names it
    to the model. `/bin/sh` for everyone made codex under openenv run every command, and the login-shell
    snapshot it takes first, in dash, where the same CLI on its own (or in a Harbor image) has bash. Not
    the caller's own shell: the same env must give the same shell on every operator's machine."""
    bash = system / "bin" / "bash"
    return "/bin/bash" if os.access(bash, os.X_OK) else "/bin/sh"


def write_identity(etc: Path, uid: int, home: Path | str, shell: str = "/bin/sh") -> None:
    """passwd and group files naming the sandbox's user, so `whoami`, `id -un` and Node's
    `os.userInfo()` work inside (the host's own accounts are not shown); `shell` is its login shell
    (`login_shell`)."""
    etc.mkdir(parents=True, exist_ok=True)
    (etc / "passwd").write_text(
        f"root:x:0:0:root:/root:{shell}\n{SANDBOX_USER}:x:{uid}:{uid}:openenv sandbox:{home}:{shell}\n"
        "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
    )
    (etc / "group").write_text(f"root:x:0:\n{SANDBOX_USER}:x:{uid}:\nnogroup:x:65534:\n")
    for name in ("passwd", "group"):
        (etc / name).chmod(0o644)
