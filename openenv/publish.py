"""Publishing an env as a Hugging Face Docker Space: the Space folder, and its upload with `huggingface_hub`.

A Space folder holds everything the Space builds from:
  README.md     front matter `sdk: docker` and `app_port`, so the Hub runs the Dockerfile and routes to it;
  Dockerfile    installs the bundled openenv source and runs `openenv serve env --port APP_PORT`;
  openenv-src/  the installed openenv (its `openenv/` and `echo_env/` packages, shipped env folders
                included) with a pyproject.toml written from the installed distribution's metadata, so a
                wheel install publishes the same Space as a source checkout;
  env/          the env folder itself (its `openenv.yaml` and code);
  pyproject.toml, <x>/  the client package the reference OpenEnv's `AutoEnv.from_env("owner/name")` installs
                (`pip install git+https://huggingface.co/spaces/owner/name`): `openenv-<x>` with
                `<x>/openenv.yaml` and `<x>/client.py` (`openenv/space_package.py`).
Once the Space runs, our `AutoEnv.from_env("owner/name")` connects to `https://owner-name.hf.space`, the
reference's installs the client package and connects there too, and MCP clients to its `/mcp`.

What goes in (docs/security.md): of the env folder, only files a `git add` would take and never a dotfile:
anything named by a `.gitignore` (the folder's own, nested ones, and those of the git repository above it),
any path with a part starting with `.` (`.env` with its tokens, `.git` with its config), caches and
symlinks are left out. Spaces are created private unless asked otherwise, and the Space's server requires
a bearer token (the `OPENENV_TOKEN` secret); a public Space's container refuses to start without one (a
server that makes its own token prints it to the Space's logs). `dest` must be new or empty: it is never
deleted.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from openenv.auto import hf_space_url
from openenv.errors import BadRequest, NotFound, TransportError
from openenv.manifest import MANIFEST_FILE, Manifest
from openenv.resources import env_dirs
from openenv.source_tree import write_source_tree
from openenv.space_package import space_package, write_space_package

__all__ = [
    "SPACE_PORT",
    "SpaceFiles",
    "build_space_folder",
    "env_folder",
    "push_space",
    "space_files",
    "space_readme",
]

SPACE_PORT = 7860  # the port Spaces route to unless app_port says otherwise; we state it explicitly
# Never shipped from an env folder, .gitignore or not: caches and build leftovers (dotfiles go by name).
_ALWAYS_OUT = ("__pycache__/", "*.pyc", "*.pyo", "*.egg-info/", "node_modules/")
_DOCKERFILE = """\
# Built by `openenv push`: serves the `{name}` env on port {port} (HTTP, WebSocket and MCP at /mcp).
# BASE_IMAGE: offline builds substitute a local image whose pip installs from a wheelhouse.
ARG BASE_IMAGE=python:3.11-slim
FROM ${{BASE_IMAGE}}
WORKDIR /app
COPY openenv-src/ /app/openenv-src/
RUN pip install --no-cache-dir /app/openenv-src
COPY env/ /app/env/
# The Hub runs every Space as uid 1000; no account is needed for it.
USER 1000
# The Hub runs the container with a read-only root: the server's files (its token file) go under /tmp.
ENV HOME=/tmp/home
EXPOSE {port}
# The server requires a bearer token: set the Space secret OPENENV_TOKEN (else one is made and printed to
# the Space's logs); clients send it (`export OPENENV_TOKEN=...`).
CMD ["openenv", "serve", "/app/env", "--host", "0.0.0.0", "--port", "{port}", "--allowed-host", "{allowed_host}"]
"""


def space_readme(manifest: Manifest, repo_id: str | None) -> str:
    """The Space card: YAML front matter the Hub reads, then how to use the env."""
    target = repo_id or f"<owner>/{manifest.name}"
    package = space_package(repo_id, manifest.name)
    return (
        "---\n"
        f"title: {manifest.name}\n"
        "sdk: docker\n"
        f"app_port: {SPACE_PORT}\n"
        "tags:\n  - openenv\n  - reinforcement-learning\n"
        f"short_description: {_one_line(manifest.description or manifest.name)}\n"
        "---\n\n"
        f"# {manifest.name}\n\n{manifest.description}\n\n"
        "An openenv environment: `reset`/`step`/`state` over HTTP and WebSocket, "
        "and its tools over MCP at `/mcp`. With openenv-harness (`pip install openenv-harness`):\n\n"
        f'```python\nfrom openenv import AutoEnv\n\nenv = AutoEnv.from_env("{target}")\n```\n\n'
        "The server requires a bearer token: set the Space secret `OPENENV_TOKEN`, and the same value in "
        "`OPENENV_TOKEN` where the client runs.\n\n"
        "With the reference OpenEnv (`pip install openenv`), `AutoEnv.from_env` installs this repository's "
        f"client package `{package.distribution}` and returns its `{package.client_class}` (dict actions and "
        "observations) connected to the Space; it finds public Spaces only:\n\n"
        f'```python\nimport os\n\nfrom openenv import AutoEnv\n\nenv = AutoEnv.from_env("{target}", trust_remote_code=True, '
        'token=os.environ["OPENENV_TOKEN"]).sync()\n```\n'
    )


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return (line[:57] + "...") if len(line) > 60 else line


def build_space_folder(env: str, dest: Path, *, repo_id: str | None = None, public: bool = False) -> Path:
    """Write the Space folder of `env` (a name or an env folder) into `dest`, which must be new or empty.

    `public`: the Space will be public, so its container refuses to start without a token it was given
    (`_require_token`): a server that makes its own would print it to the Space's logs.

    Raises:
        NotFound: `env` is not an env folder, nor the name of one under the env search paths.
        BadRequest: `dest` exists and is not an empty folder (it is never deleted or overwritten).
    """
    manifest, folder = Manifest.load(env_folder(env))
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise BadRequest(
            f"{dest} exists and is not empty; give --out a new or empty folder (nothing in it is "
            "deleted or overwritten)",
            path=str(dest),
        )
    if (folder / "spec.yaml").is_file():  # a harness env: its image needs the CLI, the proxy and a tokenizer
        _harness_space_folder(manifest, dest, repo_id)
    else:
        _env_space_folder(manifest, folder, dest, repo_id)
    write_space_package(dest, manifest, repo_id, port=SPACE_PORT)
    if public:
        dockerfile = dest / "Dockerfile"
        dockerfile.write_text(_require_token(dockerfile.read_text()))
    return dest


def _env_space_folder(manifest: Manifest, folder: Path, dest: Path, repo_id: str | None) -> None:
    write_source_tree(dest / "openenv-src")
    for rel in space_files(folder).included:
        (dest / "env" / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(folder / rel, dest / "env" / rel, follow_symlinks=False)
    allowed = urlsplit(hf_space_url(repo_id)).hostname if repo_id else "*"
    (dest / "Dockerfile").write_text(
        _DOCKERFILE.format(name=manifest.name, port=SPACE_PORT, allowed_host=allowed)
    )
    (dest / "README.md").write_text(space_readme(manifest, repo_id))


def _harness_space_folder(manifest: Manifest, dest: Path, repo_id: str | None) -> None:
    """A harness env's Space is its env image's build context (`openenv.harness.env_image`) and the card."""
    from openenv.harness.catalog import get_spec
    from openenv.harness.env_image import write_env_context
    from openenv.models import tiny_model_path

    if dest.exists():
        dest.rmdir()  # checked empty above; write_env_context makes it
    allowed = urlsplit(hf_space_url(repo_id)).hostname if repo_id else "*"
    write_env_context(
        get_spec(manifest.name),
        dest,
        model=tiny_model_path(),
        port=SPACE_PORT,
        allowed_host=allowed,
        space=True,
    )
    (dest / "README.md").write_text(space_readme(manifest, repo_id))


MIN_TOKEN_CHARS = 16


def _require_token(dockerfile: str) -> str:
    """The Dockerfile with its `CMD` run only when `OPENENV_TOKEN` holds a token of 16+ characters.

    Without the secret, `openenv serve` makes a token and prints it to the container's log; on a public
    Space the log is the one place that token should never be. So the public Space does not serve at all
    until its owner sets the secret, and says so in the log.
    """
    lines = dockerfile.rstrip("\n").splitlines()
    cmd = json.loads(lines[-1].removeprefix("CMD "))
    guard = (
        f'if [ "${{#OPENENV_TOKEN}}" -lt {MIN_TOKEN_CHARS} ]; then echo "refusing to serve: this public Space '
        f"needs the Space secret OPENENV_TOKEN ({MIN_TOKEN_CHARS}+ characters; clients send it as a bearer "
        f'token)" >&2; exit 78; fi; exec {shlex.join(cmd)}'
    )
    lines[-1] = "CMD " + json.dumps(["sh", "-c", guard])
    return (
        "\n".join(lines[:-1])
        + "\n# Public Space: no token, no server (a made-up one would be printed to the "
        "public log).\n" + lines[-1] + "\n"
    )


@dataclass
class SpaceFiles:
    """The files of a folder that go into a Space, and those left out with the reason (paths relative)."""

    included: list[Path] = field(default_factory=list)
    left_out: list[tuple[Path, str]] = field(default_factory=list)


def space_files(root: Path) -> SpaceFiles:
    """Every file under `root` a Space may carry: not a dotfile or under a dot-folder, not ignored by a
    `.gitignore` (in `root`, below it, or in the git repository above it), not a cache, not a symlink."""
    root = root.resolve()
    rules = _GitIgnores(root)
    found = SpaceFiles()
    for folder, dirs, names in os.walk(root):
        here = Path(folder)
        rules.load(here)
        for name in sorted(dirs):
            why = _why_out(here / name, root, rules, is_dir=True)
            if why is not None:
                dirs.remove(name)
                found.left_out.append(((here / name).relative_to(root), why))
        dirs.sort()
        for name in sorted(names):
            why = _why_out(here / name, root, rules, is_dir=False)
            if why is None:
                found.included.append((here / name).relative_to(root))
            else:
                found.left_out.append(((here / name).relative_to(root), why))
    return found


def _why_out(path: Path, root: Path, rules: _GitIgnores, *, is_dir: bool) -> str | None:
    rel = path.relative_to(root).as_posix() + ("/" if is_dir else "")
    if path.name.startswith("."):
        return "a dotfile (never shipped: .env, .git, ...)"
    if path.is_symlink():
        return "a symlink (its target could be anywhere)"
    if rules.always.match_file(rel):
        return "a cache or build leftover"
    if rules.ignored(path, is_dir=is_dir):
        return "ignored by .gitignore"
    return None


class _GitIgnores:
    """`.gitignore` files as git reads them: each one's patterns apply below its own folder."""

    def __init__(self, root: Path) -> None:
        import pathspec

        self._spec = pathspec.GitIgnoreSpec
        self.always = pathspec.GitIgnoreSpec.from_lines(_ALWAYS_OUT)
        self._rules: list[tuple[Path, Any]] = []
        top = next((p for p in (root, *root.parents) if (p / ".git").exists()), None)
        if top is not None:  # the repository's .gitignore files above `root` apply to it as well
            for folder in reversed([p for p in root.parents if p.is_relative_to(top)]):
                self.load(folder)

    def load(self, folder: Path) -> None:
        file = folder / ".gitignore"
        if file.is_file() and not file.is_symlink():
            self._rules.append((folder, self._spec.from_lines(file.read_text(errors="replace").splitlines())))

    def ignored(self, path: Path, *, is_dir: bool) -> bool:
        return any(
            path.is_relative_to(base)
            and spec.match_file(path.relative_to(base).as_posix() + ("/" if is_dir else ""))
            for base, spec in self._rules
        )


def env_folder(env: str) -> Path:
    """An env folder by path, else by name under the env search paths (installed-only envs have none)."""
    candidates = [Path(env).expanduser(), *(root / env for root in env_dirs())]
    for folder in candidates:
        if (folder / MANIFEST_FILE).is_file():
            return folder
    raise NotFound(
        f"{env!r} is not an env folder (no {MANIFEST_FILE}) nor one under "
        f"{', '.join(map(str, env_dirs()))}; `openenv push` publishes an env folder",
        env=env,
    )


def push_space(
    folder: Path, repo_id: str, *, token: str | None = None, endpoint: str | None = None, private: bool = True
) -> str:
    """Create (or reuse) the Docker Space `repo_id` and upload `folder` as one commit.

    Args:
        folder: a folder from `build_space_folder`.
        repo_id: `owner/name`.
        token: a Hub token; default: the one `huggingface_hub` finds (HF_TOKEN, the login cache).
        endpoint: the Hub URL; default: `huggingface_hub`'s (HF_ENDPOINT, else huggingface.co).
        private: create the Space private (the default; a public Space shows its code to everyone).

    Returns:
        The URL the Space serves the env at.

    Raises:
        ValueError: `repo_id` is not `owner/name` (nothing is sent).
        TransportError: the Hub refused or could not be reached; the message carries its answer.
    """
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError

    url = hf_space_url(repo_id)  # validates the id before anything is sent
    api = HfApi(endpoint=endpoint, token=token)
    try:
        api.create_repo(repo_id, repo_type="space", space_sdk="docker", private=private, exist_ok=True)
        api.upload_folder(
            folder_path=str(folder), repo_id=repo_id, repo_type="space", commit_message="openenv push"
        )
    except (HfHubHTTPError, ValueError) as exc:  # the card check answers with a ValueError
        raise TransportError(f"the Hub at {api.endpoint} refused the upload of {repo_id}: {exc}") from None
    return url
