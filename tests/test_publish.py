"""`openenv push`: the Space folder, and its upload through `huggingface_hub` to a Hub STAND-IN.

The Hub cannot be reached from here, so `HubStandIn` below is a local stand-in of the three Hub HTTP
endpoints an upload uses (repo create, preupload, commit), served on 127.0.0.1. It is not the Hub: it
checks what `huggingface_hub` sends and records it; it does not build or run the Space.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from fastapi import FastAPI, Request
from typer.testing import CliRunner

from openenv.auto import AutoEnv
from openenv.cli.main import app as cli
from openenv.core.auth import auth_headers
from openenv.core.net import free_port
from openenv.errors import TransportError
from openenv.publish import SPACE_PORT, build_space_folder, push_space
from openenv.server import LocalServer
from openenv.space_package import space_package

REPO = Path(__file__).resolve().parents[1]


class HubStandIn:
    """A stand-in of the Hub's upload API: records created repos and committed files."""

    def __init__(self) -> None:
        self.repos: list[dict[str, Any]] = []
        self.files: dict[str, bytes] = {}
        self.commit_headers: list[dict[str, Any]] = []
        self.auth: list[str] = []
        self.app = FastAPI()
        self.app.post("/api/repos/create")(self.create)
        self.app.post("/api/validate-yaml")(self.validate_yaml)
        self.app.post("/api/spaces/{owner}/{name}/preupload/{revision}")(self.preupload)
        self.app.post("/api/spaces/{owner}/{name}/commit/{revision}")(self.commit)
        self.app.get("/api/spaces/{owner}/{name}")(self.space_info)

    async def space_info(self, owner: str, name: str) -> Any:
        """What `AutoEnv` asks after a push: where the Space is served (the Hub's `host` rule)."""
        from fastapi.responses import JSONResponse

        repo_id = f"{owner}/{name}"
        if not any(f"{r['organization']}/{r['name']}" == repo_id for r in self.repos):
            return JSONResponse(
                {"error": "Repository not found"}, status_code=404, headers={"X-Error-Code": "RepoNotFound"}
            )
        host = "https://" + f"{owner}-{name}".replace("_", "-").replace(".", "-").lower() + ".hf.space"
        return {"id": repo_id, "host": host, "runtime": {"stage": "BUILDING", "hardware": {"current": None}}}

    async def create(self, request: Request) -> dict[str, Any]:
        body = await request.json()
        self.auth.append(request.headers.get("authorization", ""))
        self.repos.append(body)
        repo_id = f"{body['organization']}/{body['name']}"
        return {"url": f"{request.base_url}spaces/{repo_id}", "name": repo_id, "id": repo_id}

    async def validate_yaml(self, request: Request) -> Any:
        """The Hub refuses a Space card without an `sdk`; so does the stand-in."""
        from fastapi.responses import JSONResponse

        body = await request.json()
        content = body["content"]
        matter = (
            yaml.safe_load(content.split("---\n", 2)[1])
            if content.startswith("---\n")
            else yaml.safe_load(content)
        )
        if body.get("repoType") == "space" and not (matter or {}).get("sdk"):
            return JSONResponse({"errors": [{"message": "sdk is required for a Space"}]}, status_code=400)
        return {"errors": [], "warnings": []}

    async def preupload(self, request: Request) -> dict[str, Any]:
        files = (await request.json())["files"]
        return {"files": [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False} for f in files]}

    async def commit(self, request: Request, owner: str, name: str) -> dict[str, Any]:
        for line in (await request.body()).splitlines():
            item = json.loads(line)
            if item["key"] == "header":
                self.commit_headers.append(item["value"])
            elif item["key"] == "file":
                self.files[item["value"]["path"]] = base64.b64decode(item["value"]["content"])
        return {
            "commitUrl": f"{request.base_url}spaces/{owner}/{name}/commit/abc123",
            "commitOid": "abc123",
            "success": True,
        }


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch) -> Any:
    """The stand-in on a free 127.0.0.1 port. CI runs with HF_HUB_OFFLINE=1 (nothing may reach the real
    Hub); the stand-in is local, so offline mode is lifted for huggingface_hub in this test only."""
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    stand_in = HubStandIn()
    server = LocalServer(stand_in.app).start()
    stand_in.url = server.base_url  # type: ignore[attr-defined]
    monkeypatch.setenv("HF_ENDPOINT", server.base_url)  # AutoEnv asks the stand-in where a Space is served
    yield stand_in
    server.stop()


def _front_matter(readme: str) -> dict[str, Any]:
    _, matter, _ = readme.split("---\n", 2)
    return yaml.safe_load(matter)  # type: ignore[no-any-return]


def test_dry_run_writes_a_docker_space_folder_with_front_matter_dockerfile_and_code(tmp_path):
    result = CliRunner().invoke(
        cli, ["push", "echo", "--repo", "alice/echo-env", "--dry-run", "--out", str(tmp_path / "space")]
    )
    assert result.exit_code == 0, result.output
    space = tmp_path / "space"
    matter = _front_matter((space / "README.md").read_text())
    assert matter["sdk"] == "docker" and matter["app_port"] == SPACE_PORT == 7860
    assert "openenv" in matter["tags"]
    assert 'AutoEnv.from_env("alice/echo-env")' in (space / "README.md").read_text()
    dockerfile = (space / "Dockerfile").read_text()
    assert (
        f'CMD ["openenv", "serve", "/app/env", "--host", "0.0.0.0", "--port", "{SPACE_PORT}", '
        '"--allowed-host", "alice-echo-env.hf.space"]'
    ) in dockerfile
    assert "pip install --no-cache-dir /app/openenv-src" in dockerfile
    assert (space / "env" / "openenv.yaml").is_file()
    project = tomllib.loads((space / "openenv-src" / "pyproject.toml").read_text())["project"]
    ours = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["name"] == ours["name"] == "openenv-harness"  # not PyPI's openenv (Hugging Face's)
    assert project["version"] == ours["version"] and project["scripts"] == ours["scripts"]
    assert len(project["dependencies"]) == len(ours["dependencies"])  # the core, no extras
    assert (space / "openenv-src" / "openenv" / "server" / "mcp.py").is_file()
    # links followed: the shipped env folders are real files, as in a wheel
    spec = space / "openenv-src" / "openenv" / "envs" / "pi" / "spec.yaml"
    assert spec.is_file() and not spec.parent.is_symlink()
    assert not list(space.rglob("__pycache__"))


def test_the_space_root_is_the_client_package_the_reference_autoenv_installs(tmp_path):
    """`pip install git+https://huggingface.co/spaces/alice/echo-env` (the reference's `AutoEnv`) builds
    `openenv-echo_env` from the root: `echo_env/openenv.yaml` and `echo_env/client.py` with `EchoEnv`, the
    names its discovery derives. The end-to-end install is tests/interop/test_reference_autoenv_space.py."""
    result = CliRunner().invoke(
        cli, ["push", "echo", "--repo", "alice/echo-env", "--dry-run", "--out", str(tmp_path / "space")]
    )
    assert result.exit_code == 0, result.output
    space = tmp_path / "space"
    pyproject = tomllib.loads((space / "pyproject.toml").read_text())
    assert pyproject["project"]["name"] == "openenv-echo_env" and pyproject["project"]["dependencies"] == []
    assert pyproject["tool"]["setuptools"]["packages"] == ["echo_env"]  # not openenv-src/ nor env/
    manifest = yaml.safe_load((space / "echo_env" / "openenv.yaml").read_text())
    assert (
        manifest["name"] == "echo_env"
        and manifest["space"] == "alice/echo-env"
        and manifest["port"] == SPACE_PORT
    )
    client = (space / "echo_env" / "client.py").read_text()
    assert (
        "class EchoEnv(GenericEnvClient):" in client and "from openenv.core.generic_client import" in client
    )
    compile(client, "client.py", "exec")
    assert "openenv-echo_env" in (space / "README.md").read_text()


@pytest.mark.parametrize(
    ("repo_id", "module", "client_class"),
    [
        ("alice/echo-env", "echo_env", "EchoEnv"),
        ("alice/coding", "coding_env", "CodingEnv"),
        ("alice/My.Space", "my_space_env", "MySpaceEnv"),
        ("alice/3d-maze", "space_3d_maze_env", "Space3dMazeEnv"),
        (
            "alice/my-envoy",
            "my_envoy_env",
            "MyoyEnv",
        ),  # the reference drops every "_env", not only the suffix
        (None, "echo_env", "EchoEnv"),
    ],
)
def test_space_package_names_follow_the_reference_discovery_rules(repo_id, module, client_class):
    package = space_package(repo_id, "echo")
    assert (package.module, package.distribution, package.client_class) == (
        module,
        f"openenv-{module}",
        client_class,
    )
    assert package.module.isidentifier()


def test_a_public_space_does_not_start_without_a_token_secret_and_a_private_one_is_unchanged(tmp_path):
    private = (build_space_folder("echo", tmp_path / "private", repo_id="alice/e") / "Dockerfile").read_text()
    public = (
        build_space_folder("echo", tmp_path / "public", repo_id="alice/e", public=True) / "Dockerfile"
    ).read_text()
    assert private.splitlines()[-1] == (
        'CMD ["openenv", "serve", "/app/env", "--host", "0.0.0.0", "--port", "7860", '
        '"--allowed-host", "alice-e.hf.space"]'
    )
    cmd = json.loads(public.splitlines()[-1].removeprefix("CMD "))
    assert cmd[:2] == ["sh", "-c"]
    guard = cmd[2]
    for token, serves in ((None, False), ("", False), ("x" * 15, False), ("x" * 16, True)):
        env = {"PATH": "/usr/bin:/bin"} | ({} if token is None else {"OPENENV_TOKEN": token})
        ran = subprocess.run(
            ["sh", "-c", guard.replace("exec openenv serve", "echo serving")],
            env=env,
            check=False,
            capture_output=True,
            text=True,
        )
        assert (ran.returncode == 0 and "serving /app/env" in ran.stdout) is serves, (token, ran)
        if not serves:
            assert ran.returncode == 78 and "needs the Space secret OPENENV_TOKEN" in ran.stderr


def test_space_folder_env_is_served_by_the_command_its_dockerfile_runs(tmp_path):
    """Runs the Dockerfile's CMD (on the host, not in Docker) against the folder's own env copy."""
    space = build_space_folder("echo", tmp_path / "space")
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "openenv.cli.main",
            "serve",
            str(space / "env"),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                url = f"http://127.0.0.1:{port}"  # the token: from the 0600 file the serve command leaves
                meta = httpx.get(f"{url}/metadata", headers=auth_headers(url), timeout=2).json()
                break
            except httpx.HTTPError:
                assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
                assert time.monotonic() < deadline, "the Space's serve command did not come up"
                time.sleep(0.3)
        assert meta["name"] == "echo"
    finally:
        proc.terminate()
        proc.wait(10)


def test_push_uploads_the_space_folder_through_huggingface_hub_then_autoenv_resolves_the_space(
    hub, tmp_path, monkeypatch
):
    monkeypatch.setenv("HF_TOKEN", "hf_standin_token")
    result = CliRunner().invoke(
        cli,
        ["push", "echo", "--repo", "alice/Echo_Env", "--endpoint", hub.url, "--out", str(tmp_path / "space")],
    )
    assert result.exit_code == 0, result.output
    assert "https://alice-echo-env.hf.space" in result.output
    [repo] = hub.repos
    assert (repo["organization"], repo["name"], repo["type"], repo["sdk"]) == (
        "alice",
        "Echo_Env",
        "space",
        "docker",
    )
    assert repo["visibility"] == "private"  # private unless --public
    assert hub.auth == ["Bearer hf_standin_token"]
    space = tmp_path / "space"
    local = {p.relative_to(space).as_posix(): p.read_bytes() for p in space.rglob("*") if p.is_file()}
    assert hub.files == local  # every file, byte for byte, in one commit
    assert hub.commit_headers[0]["summary"] == "openenv push"
    client = AutoEnv.from_env("alice/Echo_Env")
    assert client.base_url == "https://alice-echo-env.hf.space"


def test_push_api_refuses_a_bad_space_id_before_sending_anything(hub, tmp_path):
    folder = build_space_folder("echo", tmp_path / "space")
    with pytest.raises(ValueError, match="owner/name"):
        push_space(folder, "not-a-space-id", endpoint=hub.url, token="t")
    assert hub.repos == [] and hub.files == {}


def test_a_card_the_hub_refuses_is_a_clear_error(hub, tmp_path):
    folder = build_space_folder("echo", tmp_path / "space")
    (folder / "README.md").write_text("---\ntitle: echo\n---\n# no sdk\n")
    with pytest.raises(TransportError, match="refused the upload of alice/echo"):
        push_space(folder, "alice/echo", endpoint=hub.url, token="t")


def test_push_of_something_that_is_not_an_env_folder_is_a_clear_cli_error(tmp_path):
    result = CliRunner().invoke(cli, ["push", "https://example.invalid", "--dry-run", "--out", str(tmp_path)])
    assert result.exit_code == 1
    assert "publishes an env folder" in result.output


@pytest.fixture
def careless_env(tmp_path: Path) -> Path:
    """An env folder as a user's checkout looks: secrets in dotfiles, ignored files, a symlink out."""
    from openenv.scaffold import scaffold

    folder = scaffold("careless_env", tmp_path / "checkout")
    (folder / ".env").write_text("HF_TOKEN=hf_secret_from_dotenv\n")
    (folder / ".git").mkdir()
    (folder / ".git" / "config").write_text(
        '[remote "origin"]\n\turl = https://user:ghp_secret@github.com/x/y\n'
    )
    (folder / ".gitignore").write_text("secrets.txt\nbuild/\n*.log\n")
    (folder / "secrets.txt").write_text("api_key=sk-secret\n")
    (folder / "build").mkdir()
    (folder / "build" / "big.bin").write_text("x")
    (folder / "run.log").write_text("token=secret\n")
    (folder / "data").mkdir()
    (folder / "data" / ".gitignore").write_text("private.csv\n")
    (folder / "data" / "private.csv").write_text("ssn\n")
    (folder / "data" / "public.csv").write_text("a,b\n")
    outside = tmp_path / "home-secret"
    outside.write_text("id_rsa contents\n")
    (folder / "key").symlink_to(outside)
    return folder


def test_push_copies_what_git_would_and_never_a_dotfile(careless_env: Path, tmp_path: Path) -> None:
    space = build_space_folder(str(careless_env), tmp_path / "space")
    shipped = {p.relative_to(space / "env").as_posix() for p in (space / "env").rglob("*") if p.is_file()}
    for leaked in (
        ".env",
        ".git/config",
        ".gitignore",
        "secrets.txt",
        "build/big.bin",
        "run.log",
        "data/private.csv",
        "data/.gitignore",
        "key",
    ):
        assert leaked not in shipped, leaked
    assert {"openenv.yaml", "data/public.csv"} <= shipped
    everything = b"".join(p.read_bytes() for p in space.rglob("*") if p.is_file())
    for secret in (b"hf_secret_from_dotenv", b"ghp_secret", b"sk-secret", b"id_rsa contents", b"ssn"):
        assert secret not in everything
    assert not [p for p in space.rglob(".*")]  # no dotfile anywhere, the bundled openenv source included
    said = CliRunner().invoke(cli, ["push", str(careless_env), "--dry-run", "--out", str(tmp_path / "again")])
    assert said.exit_code == 0, said.output
    assert ".env (a dotfile" in said.output and "secrets.txt (ignored by .gitignore)" in said.output
    assert "key (a symlink" in said.output


def test_push_refuses_a_non_empty_out_folder_and_deletes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "precious"
    out.mkdir()
    (out / "thesis.tex").write_text("years of work")
    result = CliRunner().invoke(cli, ["push", "echo", "--dry-run", "--out", str(out)])
    assert result.exit_code == 1 and "not empty" in result.output
    assert sorted(p.name for p in out.iterdir()) == ["thesis.tex"]
    assert (out / "thesis.tex").read_text() == "years of work"
    empty = tmp_path / "empty"
    empty.mkdir()
    assert CliRunner().invoke(cli, ["push", "echo", "--dry-run", "--out", str(empty)]).exit_code == 0


def test_push_public_is_an_explicit_choice(hub, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_standin_token")
    result = CliRunner().invoke(
        cli, ["push", "echo", "--repo", "alice/open", "--endpoint", hub.url, "--public"]
    )
    assert result.exit_code == 0, result.output
    assert hub.repos[0]["visibility"] == "public" and "(public)" in result.output
