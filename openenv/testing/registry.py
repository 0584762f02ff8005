"""A real image registry on loopback (Debian's `docker-registry`, Docker's distribution 2.8), for tests
and benchmarks of pulls: these machines reach no public registry, so the protocol runs on 127.0.0.1.

    with LoopbackRegistry(tmp_path) as registry:
        ref = registry.push("openenv/base:latest", "tasks/hello:1")   # 127.0.0.1:PORT/tasks/hello:1
"""

from __future__ import annotations

import shutil
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Self

from openenv.core.net import free_port

__all__ = ["LoopbackRegistry", "registry_missing"]


def registry_missing() -> str | None:
    """Why no loopback registry can start here (None when one can)."""
    if shutil.which("docker-registry") is None:
        return "docker-registry is not installed (scripts/install_registry.sh)"
    return None


class LoopbackRegistry:
    """`docker-registry serve` on 127.0.0.1 with its storage under `root`; stopped on exit."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.port = free_port()
        self.host = f"127.0.0.1:{self.port}"
        self._proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Self:
        self.root.mkdir(parents=True, exist_ok=True)
        config = self.root / "config.yml"
        config.write_text(
            "version: 0.1\nlog: {level: error}\n"
            f"storage: {{filesystem: {{rootdirectory: {self.root / 'data'}}}, delete: {{enabled: true}}}}\n"
            f"http: {{addr: '{self.host}'}}\n"
        )
        self._proc = subprocess.Popen(["docker-registry", "serve", str(config)], stdout=subprocess.DEVNULL,
                                      stderr=(self.root / "registry.log").open("wb"))
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://{self.host}/v2/", timeout=2):
                    break
            except OSError:
                if self._proc.poll() is not None or time.monotonic() > deadline:
                    self.close()
                    raise RuntimeError(f"docker-registry did not start: {(self.root / 'registry.log').read_text()}")
                time.sleep(0.1)
        return self

    def push(self, local_image: str, repo_tag: str) -> str:
        """Push a local Docker image to `repo_tag` here (with the engine, as a user would); returns the
        registry reference `127.0.0.1:PORT/repo:tag`."""
        ref = f"{self.host}/{repo_tag}"
        subprocess.run(["docker", "tag", local_image, ref], check=True, capture_output=True)
        subprocess.run(["docker", "push", ref], check=True, capture_output=True)
        return ref

    def close(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()

    def __exit__(self, *exc: object) -> None:
        self.close()
