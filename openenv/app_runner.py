"""Serving an env folder that names an ASGI `app` (a reference OpenEnv env) by running it, not importing it.

A folder made by the reference's `openenv init` builds its server with the reference package
(`from openenv.core.env_server.http_server import create_app`), whose import name is also `openenv`: in our
interpreter that import finds us, and it fails. So such a folder is served the way the reference's own
Dockerfile serves it, `cd FOLDER && uvicorn server.app:app`, with an interpreter that has the env's
dependencies. The interpreter is, first found:
  1. the one the caller names (`openenv serve --python`, `AutoEnv.from_env(..., python=)`);
  2. `$OPENENV_APP_PYTHON`;
  3. the folder's own virtualenv, `FOLDER/.venv` (what `uv sync` in the folder makes);
  4. this interpreter, for an app that does not need the reference package.
The child gets no `PYTHONPATH` / `PYTHONHOME` from us (ours would put this package in front of the
reference's), runs with the folder as its working directory and app dir, and binds loopback by default.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from openenv.core.net import free_port, wait_for_health
from openenv.errors import BadRequest, NotFound, TransportError
from openenv.manifest import Manifest

__all__ = ["APP_PYTHON_ENV", "AppProcess", "app_command", "app_environ", "find_python"]

APP_PYTHON_ENV = "OPENENV_APP_PYTHON"
_DROPPED_ENV = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONSAFEPATH")


def find_python(folder: Path, python: str | Path | None = None) -> Path:
    """The interpreter that runs `folder`'s app, by the order in this module's docstring.

    Raises:
        NotFound: the interpreter named (argument or `$OPENENV_APP_PYTHON`) does not exist.
    """
    named = python or os.environ.get(APP_PYTHON_ENV)
    if named:
        path = Path(named).expanduser()
        if not path.exists():
            raise NotFound(f"no Python interpreter at {path} to run the env's app", python=str(path))
        return path
    for candidate in (folder / ".venv" / "bin" / "python", folder / ".venv" / "Scripts" / "python.exe"):
        if candidate.exists():
            return candidate
    return Path(sys.executable)


def app_command(manifest: Manifest, folder: Path, python: Path, *, host: str, port: int) -> list[str]:
    """The uvicorn command line that serves `manifest.app` from `folder`."""
    if manifest.app is None:
        raise BadRequest(f"{manifest.name} names an environment class, not an app; our server serves it")
    return [
        str(python),
        "-m",
        "uvicorn",
        manifest.app,
        "--app-dir",
        str(folder),
        "--host",
        host,
        "--port",
        str(port),
        "--log-level",
        "warning",
    ]


def app_environ() -> dict[str, str]:
    """This process's environment without the variables that would put our package on the child's path."""
    return {k: v for k, v in os.environ.items() if k not in _DROPPED_ENV}


@dataclass
class AppProcess:
    """A folder's ASGI app running in a child interpreter on a loopback port; `stop()` ends it."""

    folder: Path
    manifest: Manifest
    python: Path
    port: int = 0
    host: str = "127.0.0.1"
    _proc: subprocess.Popen[str] | None = field(default=None, init=False, repr=False)
    _tail: deque[str] = field(default_factory=lambda: deque(maxlen=12), init=False, repr=False)
    _drainer: threading.Thread | None = field(default=None, init=False, repr=False)

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self, *, timeout_s: float = 180.0) -> AppProcess:
        """Start the app and wait until its `/health` answers 200.

        Raises:
            TransportError: the child exited or never answered; the message carries its last output.
        """
        self.port = self.port or free_port()
        self._proc = subprocess.Popen(
            app_command(self.manifest, self.folder, self.python, host=self.host, port=self.port),
            cwd=self.folder,
            env=app_environ(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self._drainer = threading.Thread(target=self._drain, name=f"app-{self.manifest.name}", daemon=True)
        self._drainer.start()
        try:
            wait_for_health(self.base_url, timeout_s=timeout_s, gone=self._gone)
        except TransportError as exc:
            self.stop()
            self._drainer.join(timeout=5)  # the child is gone: its pipe ends, the last lines are in
            output = "".join(self._tail).strip() or "(no output)"
            raise TransportError(
                f"{self.manifest.app} from {self.folder} did not come up under {self.python}: {exc}\n"
                f"its last output:\n{output}\n(an app built on the reference OpenEnv needs an interpreter "
                f"that has it: pass --python / python=, set ${APP_PYTHON_ENV}, or make {self.folder}/.venv)"
            ) from None
        return self

    def stop(self) -> None:
        """Terminate the child (SIGTERM, then SIGKILL after 10 s). Idempotent."""
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def _gone(self) -> str | None:
        proc = self._proc
        if proc is not None and proc.poll() is not None:
            return f"the app process exited with status {proc.returncode}"
        return None

    def _drain(self) -> None:
        """Keep the child's last lines (for the error when it fails) without letting its pipe fill."""
        proc = self._proc
        if proc is None or proc.stdout is None:
            return
        for line in proc.stdout:
            self._tail.append(line)
