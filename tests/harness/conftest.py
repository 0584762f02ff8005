"""Harness-test fixtures: a leftover-process check (the capture server is the suite-wide `capture_server`) and
a stand-in package registry on loopback."""

from __future__ import annotations

import io
import json
import os
import socket
import tarfile
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote

import pytest

from openenv.harness.sandbox.local import sandboxed_processes


def upper_echo_server() -> tuple[socket.socket, int]:
    """A TCP server on this host's 127.0.0.1 that sends every byte back upper-cased, a thread per
    connection: (its socket, to close when done; its port)."""
    server = socket.create_server(("127.0.0.1", 0))

    def echo(conn: socket.socket) -> None:
        with conn:
            while data := conn.recv(65536):
                conn.sendall(data.upper())

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=echo, args=(conn,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    return server, server.getsockname()[1]


@pytest.fixture
def no_leftover_processes() -> Iterator[None]:
    """Fails the test if any sandboxed process is still alive when it ends."""
    yield
    leftovers = [f"{p.pid} {p.name()}" for p in sandboxed_processes()]
    assert leftovers == [], f"processes outlived their episode: {leftovers}"


def _package_json(tgz: bytes) -> dict[str, object]:
    with tarfile.open(fileobj=io.BytesIO(tgz), mode="r:gz") as tar:
        member = tar.extractfile("package/package.json")
        assert member is not None
        return json.load(member)


class _Registry(BaseHTTPRequestHandler):
    """npm: GET /<name> -> a packument; pip: GET /simple/<name>/ -> links to sdists. `stall` never answers.
    A version in `tarballs` (`(name, version)` -> the .tgz's bytes) is served from here, so npm installs it."""

    packages: dict[str, list[str]] = {}
    tarballs: dict[tuple[str, str], bytes] = {}
    stall = False
    seen: list[str] = []

    def do_GET(self) -> None:
        type(self).seen.append(self.path)
        if self.stall:
            time.sleep(30)
            return
        path = unquote(self.path).split("?")[0]
        if path.startswith("/tarballs/"):
            name, _, version = path.removeprefix("/tarballs/").rpartition("/")
            self._send(200, "application/octet-stream", self.tarballs[(name, version.removesuffix(".tgz"))])
            return
        here = f"http://127.0.0.1:{self.server.server_address[1]}"
        if path.startswith("/simple/"):
            name = path.removeprefix("/simple/").strip("/")
            versions = self.packages.get(name)
            body = (
                None
                if versions is None
                else "".join(
                    f'<a href="/files/{name}-{v}.tar.gz">{name}-{v}.tar.gz</a><br/>' for v in versions
                )
            )
            ctype = "text/html"
        else:
            name = path.strip("/")
            versions = self.packages.get(name)
            body = (
                None
                if versions is None
                else json.dumps(
                    {
                        "name": name,
                        "dist-tags": {"latest": versions[-1]},
                        "versions": {
                            v: {"name": name, "version": v, "dist": {"tarball": f"http://x/{v}.tgz"}}
                            if (name, v) not in self.tarballs
                            else {  # npm links bins and runs scripts from the packument, not the tarball
                                **_package_json(self.tarballs[(name, v)]),
                                "dist": {"tarball": f"{here}/tarballs/{name}/{v}.tgz"},
                            }
                            for v in versions
                        },
                    }
                )
            )
            ctype = "application/json"
        if body is None:
            self._send(404, "application/json", b'{"error":"Not found"}')
            return
        self._send(200, ctype, body.encode())

    def _send(self, status: int, ctype: str, data: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[type[_Registry]]:
    """One loopback server standing in for both registries; npm and pip are pointed at it (their user
    configuration set aside) through their own environment variables."""
    handler = type("Registry", (_Registry,), {"packages": {}, "tarballs": {}, "stall": False, "seen": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_port}"
    monkeypatch.setenv("npm_config_registry", url + "/")
    monkeypatch.setenv("npm_config_cache", str(tmp_path / "npm-cache"))  # no cached packument answers
    monkeypatch.setenv("npm_config_userconfig", str(tmp_path / "npmrc"))
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_INDEX_URL", url + "/simple/")
    monkeypatch.setenv("PIP_FIND_LINKS", "")
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", "")
    monkeypatch.setenv("PIP_NO_CACHE_DIR", "1")
    try:
        yield handler
    finally:
        server.shutdown()
        server.server_close()
