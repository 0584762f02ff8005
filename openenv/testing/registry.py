"""A real image registry on loopback: Debian's `docker-registry` (Docker's distribution 2.8) for pull tests.

These machines reach no image registry, so the pull paths (the Docker engine's pull, skopeo's copy) are
tested against this one: the real registry protocol with the network removed. It binds 127.0.0.1 only;
the Docker engine trusts loopback registries without TLS, so `docker push 127.0.0.1:PORT/x/y:1` works
with no daemon configuration. `scripts/install_registry.sh` installs it.

    with LoopbackRegistry(tmp_path / "registry") as registry:
        ref = registry.push("openenv/base:latest", "tasks/hello:1")   # "127.0.0.1:PORT/tasks/hello:1"
        registry.requests("GET", "/v2/tasks/hello/manifests/")        # how many pulls reached it
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from pathlib import Path
from types import TracebackType

import httpx

from openenv.core.net import free_port

__all__ = ["LoopbackRegistry", "registry_available"]

MANIFEST_TYPES = ", ".join(
    [
        "application/vnd.docker.distribution.manifest.v2+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.oci.image.index.v1+json",
    ]
)
# The access log is Apache's combined format on stdout: `... "GET /v2/x/manifests/1 HTTP/1.1" 200 ...`.
_ACCESS = re.compile(r'"(?P<method>[A-Z]+) (?P<path>\S+) HTTP/[0-9.]+" (?P<status>\d{3}) ')


def registry_available() -> str | None:
    """None when `docker-registry` is installed, else the reason (for test skips)."""
    if shutil.which("docker-registry") is None:
        return "docker-registry is not installed; run scripts/install_registry.sh (root)"
    return None


class LoopbackRegistry:
    """`docker-registry serve` on 127.0.0.1 and a free port, storing under `root`; a context manager.

    Args:
        root: a folder of its own: the config, the storage and the log (`registry.log`) go there.
        login: `(user, password)` makes the registry ask for them (htpasswd, Basic auth), so a test can
            show that a pull uses the engine's own credentials; None serves anyone.
    """

    def __init__(self, root: Path, *, login: tuple[str, str] | None = None) -> None:
        self.root = Path(root)
        self.login = login
        self.port = 0
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def host(self) -> str:
        """`127.0.0.1:PORT`: the registry part of an image reference."""
        if not self.port:
            raise RuntimeError("the registry is not started")
        return f"127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.root / "registry.log"

    def start(self) -> LoopbackRegistry:
        """Write the config, start the server and wait until `/v2/` answers; returns self."""
        reason = registry_available()
        if reason is not None:
            raise RuntimeError(reason)
        self.root.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        auth = ""
        if self.login is not None:
            user, password = self.login
            htpasswd = self.root / "htpasswd"
            subprocess.run(
                ["htpasswd", "-Bbc", str(htpasswd), user, password], check=True, capture_output=True
            )
            auth = f"auth:\n  htpasswd:\n    realm: loopback\n    path: {htpasswd}\n"
        config = self.root / "config.yml"
        config.write_text(
            "version: 0.1\n"
            "log:\n  level: info\n  accesslog:\n    disabled: false\n"
            f"storage:\n  filesystem:\n    rootdirectory: {self.root / 'storage'}\n  delete:\n    enabled: true\n"
            f"http:\n  addr: 127.0.0.1:{self.port}\n" + auth
        )
        log = self.log_path.open("ab")
        self._proc = subprocess.Popen(
            ["docker-registry", "serve", str(config)],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        log.close()
        self._wait_ready()
        return self

    def _wait_ready(self, timeout_s: float = 20.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._proc is not None and self._proc.poll() is not None:
                raise RuntimeError(f"docker-registry exited ({self._proc.returncode}): {self._log_tail()}")
            try:
                if httpx.get(f"http://{self.host}/v2/", timeout=2.0).status_code in (200, 401):
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(
            f"docker-registry on {self.host} did not answer within {timeout_s:g} s: {self._log_tail()}"
        )

    def _log_tail(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-2000:]
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL after 5 s); the storage stays under `root`."""
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)

    def __enter__(self) -> LoopbackRegistry:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def push(self, local_image: str, repo_tag: str) -> str:
        """Tag the engine's `local_image` as `HOST/repo_tag` and push it here; returns that reference.

        The pushed tag stays in the engine; remove it (and `local_image`) to make a test pull for real.
        A registry with a `login` is pushed to with it (the engine's stored credentials are not needed).

        Raises:
            RuntimeError: the engine refused the push (the message holds its answer).
        """
        import docker

        reference = f"{self.host}/{repo_tag}"
        repository, _, tag = reference.rpartition(":")
        client = docker.from_env()
        try:
            client.images.get(local_image).tag(repository, tag)
            auth = {"username": self.login[0], "password": self.login[1]} if self.login else None
            for chunk in client.api.push(repository, tag, stream=True, decode=True, auth_config=auth):
                if "error" in chunk:
                    raise RuntimeError(f"pushing {reference} failed: {chunk['error']}")
        finally:
            client.close()
        return reference

    def digest(self, repo_tag: str) -> str:
        """The manifest digest (`sha256:...`) the registry serves for `repo_tag` (no HOST part)."""
        repository, _, tag = repo_tag.rpartition(":")
        response = httpx.head(
            f"http://{self.host}/v2/{repository}/manifests/{tag}",
            headers={"Accept": MANIFEST_TYPES},
            auth=self.login,
            timeout=10.0,
        )
        response.raise_for_status()
        return response.headers["Docker-Content-Digest"]

    def requests(self, method: str, path_prefix: str) -> int:
        """How many requests of `method` on a path starting with `path_prefix` the registry answered."""
        count = 0
        try:
            log = self.log_path.read_text(errors="replace")
        except OSError:
            return 0
        for line in log.splitlines():
            match = _ACCESS.search(line)
            if match and match["method"] == method and match["path"].startswith(path_prefix):
                count += 1
        return count
