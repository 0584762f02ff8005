"""A harness env as one image: the pinned harness CLI, openenv (the env server and the capture proxy)
and the model's tokenizer, served by `openenv serve <harness>`. The engine stays outside.

`write_env_context` writes the build context; `openenv build HARNESS` builds it, and `openenv push`
writes the same folder (plus the Space card) as a harness env's Space, with `space_dockerfile` instead
(public base images, and the Space runtime: see its docstring):

    Dockerfile     FROM $BASE_IMAGE: a Python 3.11 venv whose `pip` can install openenv's dependencies,
                   and Node 22 (offline: openenv/python from scripts/build_python_image.sh)
    openenv-src/   the running openenv, installable (`openenv.source_tree.write_source_tree`)
    harness/       the host's pinned install of the CLI (`openenv harness install`), placed at the same
                   path inside the image (Node 22 or 24 for harnesses that need it under harness/node22, harness/node24)
    model/         the model folder's tokenizer and chat template (no weights: the engine holds them)

The image is configured at `docker run` by environment variables:

    OPENENV_VLLM_URL           the engine (an OpenAI-compatible vLLM; base URL without /v1); required
    OPENENV_BACKEND            `vllm` (default in the image) or `local` (needs torch and weights)
    OPENENV_MODEL              the tokenizer folder (default: the bundled /opt/openenv/model)
    OPENENV_SANDBOX_ISOLATION  `bwrap` (default): the harness runs under bubblewrap inside the container,
                               which needs `--cap-add SYS_ADMIN --cap-add NET_ADMIN --security-opt
                               seccomp=unconfined --security-opt apparmor=unconfined` to create its
                               namespaces (NET_ADMIN: bwrap brings up the loopback of its own). `none` runs
                               it without (a platform that grants no capability), but then the Harbor
                               paths (/app, /tests, /logs/verifier) do not exist and Harbor tasks,
                               the built-in ones included, cannot be graded. `container` (the Space's
                               Dockerfile sets it): a plain subprocess with the container as the boundary
                               and the Harbor paths linked into /tmp (`sandbox/container.py`).
    OPENENV_SANDBOX_CGROUP     `none` (set in the image): Docker mounts /sys/fs/cgroup read-only, so the
                               sandbox makes no cgroup of its own; the container bounds its resources.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from openenv.distribution import requirements
from openenv.errors import BadRequest, EnvError
from openenv.harness.install import cache_root, install, install_status, prefix
from openenv.harness.spec import HarnessSpec
from openenv.source_tree import write_source_tree

__all__ = [
    "ENV_PORT",
    "MODEL_DIR",
    "SPACE_BASES",
    "build_args",
    "build_env_image",
    "env_dockerfile",
    "env_image_tag",
    "space_dockerfile",
    "write_env_context",
]

ENV_PORT = 8000
MODEL_DIR = "/opt/openenv/model"
# The capture extra without torch: prompts are rendered with the tokenizer, the engine samples.
_PROXY_DEPS = ("transformers", "tokenizers", "safetensors", "msgspec", "xxhash", "regex", "jinja2")
_MODEL_FILES = ("*.json", "*.jinja", "*.txt", "*.model", "*.tiktoken")
Progress = Callable[[str], None]
# The Space's public base images (build args): Python 3.11 with pip, and Node 22's binary from its image.
# Offline, scripts/build_python_image.sh's openenv/python and build_base_image.sh's openenv/base stand in.
SPACE_BASES = {"BASE_IMAGE": "python:3.11-slim-bookworm", "NODE_IMAGE": "node:22-bookworm-slim"}
# The Harbor paths task scripts use, linked into /tmp: at run time only /tmp and /data are writable.
_HARBOR_LINKS = ("app", "tests", "solution", "logs")


def _dependencies() -> list[str]:
    """openenv's core requirements (from the installed distribution) and the proxy's."""
    return [*requirements(), *_PROXY_DEPS]


def env_image_tag(spec: HarnessSpec) -> str:
    """`openenv/env-<harness>:<pinned version>`: the env server image of a harness."""
    return f"openenv/env-{spec.name}:{re.sub(r'[^A-Za-z0-9_.-]', '-', spec.install.version)}"


def env_dockerfile(
    spec: HarnessSpec,
    *,
    port: int = ENV_PORT,
    base: str = "openenv/python:latest",
    allowed_host: str | None = None,
) -> str:
    """The Dockerfile of a harness env image (see the module docstring for the context it expects).

    `allowed_host`: a name the server answers to besides loopback ones (a Space's host, or `*`)."""
    extra = f', "--allowed-host", "{allowed_host}"' if allowed_host else ""
    cache = str(cache_root())
    node22 = f" PATH={cache}/{spec.install.node_dir}/bin:$PATH" if spec.install.node_dir else ""
    return f"""\
# The {spec.name} harness ({spec.install.package} {spec.install.version}) as an openenv env server:
# reset/step/state over HTTP and WebSocket, tools over MCP at /mcp, the capture proxy inside.
#   docker run -p 127.0.0.1:{port}:{port} -e OPENENV_VLLM_URL=http://ENGINE:8000 \\
#     --cap-add SYS_ADMIN --cap-add NET_ADMIN --security-opt seccomp=unconfined --security-opt apparmor=unconfined IMAGE
# (the capability lets bubblewrap wall the harness in inside the container; see
# openenv/harness/env_image.py for OPENENV_BACKEND, OPENENV_MODEL and OPENENV_SANDBOX_ISOLATION).
# BASE_IMAGE: Python 3.11 with a venv on PATH whose pip can install the dependencies, Node 22 and
# bubblewrap (offline: openenv/python, from the repository's scripts/build_python_image.sh).
ARG BASE_IMAGE={base}
FROM ${{BASE_IMAGE}}
# Dependencies first: this layer stays cached while openenv itself changes.
RUN pip install -q {" ".join(shlex.quote(req) for req in _dependencies())}
COPY openenv-src/ /opt/openenv/src/
RUN pip install -q --no-deps /opt/openenv/src
COPY model/ {MODEL_DIR}/
COPY harness/ {cache}/
ENV OPENENV_HARNESS_CACHE={cache} OPENENV_MODEL={MODEL_DIR} OPENENV_BACKEND=vllm OPENENV_SANDBOX_CGROUP=none{node22}
RUN python -c "from openenv.harness.catalog import get_spec; from openenv.harness.install import \
install_status; s = install_status(get_spec('{spec.name}')); assert s.ready, s"
LABEL openenv.harness="{spec.name}" openenv.harness.version="{spec.install.version}" openenv.kind="env"
EXPOSE {port}
# The server requires a bearer token: pass OPENENV_TOKEN (else one is made and printed to the log).
CMD ["openenv", "serve", "{spec.name}", "--host", "0.0.0.0", "--port", "{port}"{extra}]
"""


def space_dockerfile(spec: HarnessSpec, *, port: int, allowed_host: str | None = None) -> str:
    """The Dockerfile of a harness env's Space: it builds `FROM` public images only, and runs as Spaces run
    containers: uid 1000, no added capability, the default seccomp profile, a read-only root with `/tmp`
    and `/data` writable. Bubblewrap cannot start there, so the harness runs as a plain subprocess with
    the container as its boundary (`OPENENV_SANDBOX_ISOLATION=container`, `sandbox/container.py`)."""
    from openenv.harness.sandbox.container import CONTAINER_MARKER, harbor_root

    extra = f', "--allowed-host", "{allowed_host}"' if allowed_host else ""
    cache = str(cache_root())
    node22 = f" PATH={cache}/{spec.install.node_dir}/bin:$PATH" if spec.install.node_dir else ""
    harbor = harbor_root()
    links = " && ".join(f"ln -s {harbor}/{name} /{name}" for name in _HARBOR_LINKS)
    return f"""\
# Built by `openenv push`: the {spec.name} harness ({spec.install.package} {spec.install.version}) as an
# openenv env server on port {port}: reset/step/state over HTTP and WebSocket, tools over MCP at /mcp, the
# capture proxy inside. The engine stays outside: set the Space secret OPENENV_VLLM_URL (an
# OpenAI-compatible vLLM, base URL without /v1) and OPENENV_TOKEN (the bearer token clients send).
# It runs as a Space runs it: uid 1000, no added capability, the default seccomp profile, only /tmp and
# /data writable. The harness runs as a plain subprocess: the container is its boundary
# (OPENENV_SANDBOX_ISOLATION=container; what that gives up: openenv's docs/security.md).
ARG BASE_IMAGE={SPACE_BASES["BASE_IMAGE"]}
ARG NODE_IMAGE={SPACE_BASES["NODE_IMAGE"]}
FROM ${{NODE_IMAGE}} AS node
FROM ${{BASE_IMAGE}}
COPY --from=node /usr/local/bin/node /usr/local/bin/node
# Dependencies first: this layer stays cached while openenv itself changes.
RUN pip install --no-cache-dir -q {" ".join(shlex.quote(req) for req in _dependencies())}
# Then what changes seldom (the pinned CLI, the tokenizer, the Harbor links), openenv itself last.
COPY model/ {MODEL_DIR}/
COPY harness/ {cache}/
RUN rm -rf {" ".join("/" + name for name in _HARBOR_LINKS)} && {links} && touch {CONTAINER_MARKER}
COPY openenv-src/ /opt/openenv/src/
RUN pip install --no-cache-dir -q --no-deps /opt/openenv/src
ENV HOME=/tmp/home OPENENV_HARNESS_CACHE={cache} OPENENV_MODEL={MODEL_DIR} OPENENV_BACKEND=vllm \\
    OPENENV_SANDBOX_ISOLATION=container OPENENV_SANDBOX_CGROUP=none PYTHONDONTWRITEBYTECODE=1{node22}
RUN python -c "from openenv.harness.catalog import get_spec; from openenv.harness.install import \\
install_status; s = install_status(get_spec('{spec.name}')); assert s.ready, s"
LABEL openenv.harness="{spec.name}" openenv.harness.version="{spec.install.version}" openenv.kind="space"
USER 1000
EXPOSE {port}
CMD ["openenv", "serve", "{spec.name}", "--host", "0.0.0.0", "--port", "{port}"{extra}]
"""


def build_args(dockerfile: str, substitutes: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    """Build args that replace the Dockerfile's `ARG NAME=IMAGE` base images found in `substitutes`
    (`{public image: local image}`, for a machine with no registry), and one line per substitution."""
    args: dict[str, str] = {}
    said: list[str] = []
    for match in re.finditer(r"^ARG (\w+)=(\S+)$", dockerfile, flags=re.MULTILINE):
        name, image = match.groups()
        if image in substitutes:
            args[name] = substitutes[image]
            said.append(f"substituting {image} -> {substitutes[image]} ({name})")
    return args, said


def _copy_tree(src: Path, dest: Path) -> None:
    """Hard links where the filesystem allows (a 200 MB CLI in milliseconds), else copies; links kept."""

    def link_or_copy(a: str, b: str) -> Any:
        try:
            return os.link(a, b)
        except OSError:
            return shutil.copy2(a, b)

    shutil.copytree(src, dest, symlinks=True, copy_function=link_or_copy)


def write_env_context(
    spec: HarnessSpec,
    dest: Path,
    *,
    model: Path,
    port: int = ENV_PORT,
    base: str = "openenv/python:latest",
    allowed_host: str | None = None,
    progress: Progress = print,
    space: bool = False,
) -> Path:
    """Write the build context of `spec`'s env image into `dest` (which must not exist yet); `space`:
    with the Space's Dockerfile (`space_dockerfile`) instead of the env image's.

    Raises:
        BadRequest: the harness is installed with pip (its virtualenv points at this host's Python),
            or `model` has no tokenizer.
        EnvError: installing the pinned CLI failed.
    """
    if spec.install.method != "npm":
        raise BadRequest(
            f"{spec.name} installs with {spec.install.method}: its virtualenv is tied to this "
            "host's Python, so only npm harnesses are bundled into env images for now"
        )
    if not (model / "tokenizer_config.json").is_file():
        raise BadRequest(f"{model} has no tokenizer_config.json; pass a model folder with a tokenizer")
    if not install_status(spec).ready:
        progress(f"installing {spec.install.package}@{spec.install.version} on the host")
        install([spec.name])
    dest.mkdir(parents=True)
    write_source_tree(dest / "openenv-src")
    _copy_tree(prefix(spec), dest / "harness" / spec.name)
    if spec.install.node_dir:
        _copy_tree(cache_root() / spec.install.node_dir, dest / "harness" / spec.install.node_dir)
    (dest / "model").mkdir()
    for pattern in _MODEL_FILES:
        for file in model.glob(pattern):
            shutil.copy2(file, dest / "model" / file.name)
    (dest / "Dockerfile").write_text(
        space_dockerfile(spec, port=port, allowed_host=allowed_host)
        if space
        else env_dockerfile(spec, port=port, base=base, allowed_host=allowed_host)
    )
    (dest / "openenv-env.json").write_text(
        json.dumps({"harness": spec.name, "version": spec.install.version, "port": port}, indent=2) + "\n"
    )
    return dest


def build_env_image(
    client: Any,
    spec: HarnessSpec,
    *,
    model: Path,
    base: str = "openenv/python:latest",
    network: str = "none",
    workdir: Path,
    progress: Progress = print,
) -> str:
    """Build `spec`'s env image from a fresh context under `workdir`; return its tag.

    Raises:
        EnvError: the build failed (the message holds the engine's last lines).
    """
    import docker.errors

    context = write_env_context(spec, workdir / f"env-{spec.name}", model=model, base=base, progress=progress)
    tag = env_image_tag(spec)
    progress(f"building {tag} FROM {base} (network {network})")
    try:
        _, logs = client.images.build(
            path=str(context),
            tag=tag,
            network_mode=network,
            rm=True,
            buildargs={"BASE_IMAGE": base},
            labels={"openenv.harness": spec.name},
        )
    except docker.errors.BuildError as exc:
        tail = "".join(str(line.get("stream", line.get("error", ""))) for line in list(exc.build_log)[-15:])
        raise EnvError(f"building {tag} failed: {exc.msg}\n{tail}") from None
    for line in logs:
        if text := str(line.get("stream", "")).strip():
            progress(text)
    return tag
