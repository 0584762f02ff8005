"""Every `OPENENV_*` environment variable in one place: its name, kind, default and meaning, and one parser
for the boolean ones.

The table of variables in docs/settings.md is generated from `SETTINGS` (`python -m openenv.settings` prints it;
tests/test_settings.py fails when that copy differs), so a variable is documented where it is
declared. A boolean reads the same way everywhere through `flag()`: `1/true/yes/on` and `0/false/no/off`
(any case, spaces ignored), unset or empty is its default, and anything else is a `ValueError` naming the
variable, rather than one module reading `TRUE` as on and the next as off.

This module sits at the bottom of the layering (the standard library only), so every layer may read
through it. Today the boolean variables are read here; the others are declared (and documented) here
and still read where they are used.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

__all__ = ["SETTINGS", "Setting", "flag", "markdown_table", "parse_flag"]

Kind = Literal["flag", "text", "int", "float", "path", "url", "list", "choice", "marker"]

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


@dataclass(frozen=True, slots=True)
class Setting:
    """One environment variable.

    Attributes:
        name: the variable (`OPENENV_...`).
        kind: how its value reads: `flag` (boolean, through `flag()`), `list` (comma-separated unless the
            doc says otherwise), `marker` (set by openenv on processes it starts; not for users).
        default: the value when unset, as the docs show it ("" for none).
        doc: what it changes, for docs/settings.md's table.
    """

    name: str
    kind: Kind
    default: str
    doc: str


SETTINGS: tuple[Setting, ...] = (
    # ---- engine and model
    Setting(
        "OPENENV_VLLM_URL",
        "url",
        "",
        'the vLLM base URL (no /v1) for `backend="vllm"`, `openenv eval`/`soak`; the test suite '
        "reuses a running server at it",
    ),
    Setting(
        "OPENENV_BACKEND",
        "choice",
        "local",
        "`HarnessEnvironment`'s backend when none is given (`local`, `vllm`)",
    ),
    Setting(
        "OPENENV_MODEL",
        "path",
        "",
        "`HarnessEnvironment`'s model folder when none is given (default: the tiny model)",
    ),
    Setting(
        "OPENENV_TINY_MODEL",
        "path",
        ".cache/tiny-model",
        "where the repo's deterministic tiny model is built and read",
    ),
    # ---- capture proxy
    Setting(
        "OPENENV_JOURNAL_DIR",
        "path",
        "~/.local/state/openenv/journal",
        "where `openenv proxy` and `CaptureServer` journal each session's turns",
    ),
    Setting(
        "OPENENV_CAPTURE_ADMIN_KEY",
        "text",
        "",
        "the bearer key of `openenv proxy`'s admin API (and `openenv view`'s)",
    ),
    Setting(
        "OPENENV_SSE_KEEPALIVE_S",
        "float",
        "10",
        "seconds of silence before a streamed reply sends a keep-alive",
    ),
    Setting(
        "OPENENV_FAST_PATHS",
        "flag",
        "1",
        "the hand-written fast paths (parser, renderer, engine client); `0` runs plain pydantic, "
        "`tokenizer.encode` and httpx instead",
    ),
    # ---- env server
    Setting(
        "OPENENV_TOKEN",
        "text",
        "",
        "the env server's bearer token (default: a fresh one per start, printed once); clients send it",
    ),
    Setting("OPENENV_NO_TOKEN", "flag", "0", "serve without a token (loopback binds only)"),
    Setting("OPENENV_ALLOWED_HOSTS", "list", "", "extra `Host` headers the env server accepts"),
    Setting("OPENENV_ALLOWED_ORIGINS", "list", "", "browser origins the env server accepts"),
    Setting(
        "OPENENV_MAX_BODY_BYTES", "int", "16777216", "the env server's largest request body / WebSocket frame"
    ),
    Setting(
        "OPENENV_ALLOW_INLINE_TASKS",
        "flag",
        "0",
        "let clients send whole tasks (their commands run) in `reset`",
    ),
    Setting("OPENENV_TASK_SETS", "list", "", "task sets a server's clients may name, besides `builtin`"),
    Setting(
        "OPENENV_RUNTIME_DIR",
        "path",
        "",
        "where a local server's token file is written (default: the user's runtime dir)",
    ),
    # ---- harnesses and sandboxes
    Setting(
        "OPENENV_HARNESS_CACHE",
        "path",
        "~/.cache/openenv/harnesses (root: /var/cache/openenv/harnesses)",
        "where harness CLIs are installed at pinned versions",
    ),
    Setting(
        "OPENENV_SANDBOX_ISOLATION",
        "choice",
        "bwrap",
        "the local sandbox's isolation (`bwrap`, `container`: the container it runs in is the boundary, `none`)",
    ),
    Setting(
        "OPENENV_SANDBOX_CGROUP",
        "text",
        "",
        "`none`: no per-episode cgroup (the container it runs in is the boundary)",
    ),
    Setting("OPENENV_SANDBOX_UID", "int", "61000", "the uid the local sandbox runs the agent as"),
    Setting("OPENENV_SANDBOX_IMAGE", "text", "openenv/base:latest", "the Docker sandbox's default image"),
    Setting(
        "OPENENV_BASE_IMAGE", "text", "openenv/base:latest", "the offline base image env images build on"
    ),
    Setting(
        "OPENENV_IMAGE_SUBSTITUTES",
        "list",
        "",
        "`image=substitute` pairs: a task's image is run as its substitute",
    ),
    Setting(
        "OPENENV_PULL",
        "choice",
        "missing",
        "when the Docker sandbox pulls a task image the engine lacks (`missing`, `always`, `never`: offline)",
    ),
    Setting(
        "OPENENV_PULLED_KEEP_GB",
        "float",
        "20",
        "pulled task images no live run uses are kept up to this size, oldest-used removed first (0: none)",
    ),
    Setting(
        "OPENENV_PULLED_DIR",
        "path",
        "~/.cache/openenv/pulled-images",
        "the ledger of pulled task images and the runs using them",
    ),
    Setting(
        "OPENENV_LOCK_DIR",
        "path",
        "~/.cache/openenv/locks",
        "the lock files that make concurrent processes share one image build or pull",
    ),
    Setting(
        "OPENENV_ROOTFS_CACHE",
        "path",
        "~/.cache/openenv/rootfs",
        "task images unpacked for the local sandbox (no daemon), one root per digest; also OPENENV_PULL",
    ),
    Setting(
        "OPENENV_ROOTFS_MAX_AGE_DAYS",
        "float",
        "14",
        "`openenv sandbox sweep` removes unpacked task images no live process holds after this many days unused",
    ),
    Setting(
        "OPENENV_HARBOR_REGISTRY",
        "text",
        "Harbor's public registry.json",
        "the Harbor registry (a file or URL) that `--tasks NAME@VERSION` is resolved in",
    ),
    Setting(
        "OPENENV_LOCAL_WITHOUT_BUILD",
        "flag",
        "0",
        "run tasks that need a Docker build step in the local sandbox, without that step",
    ),
    Setting(
        "OPENENV_DOCKER_HARBOR_ROOT",
        "flag",
        "0",
        "Harbor tasks in Docker run as root on a writable root filesystem (Harbor's defaults)",
    ),
    Setting(
        "OPENENV_DOCKER_UID",
        "int",
        "61001",
        "the uid the Docker sandbox runs the agent as (refused when a host account has it)",
    ),
    Setting(
        "OPENENV_SANDBOX_OUTSIDE_CONTAINER",
        "flag",
        "0",
        "let the `container` sandbox (no isolation of its own) run outside a container",
    ),
    Setting(
        "OPENENV_CONTAINER_HARBOR",
        "path",
        "/tmp/openenv-harbor",
        "where the `container` sandbox's Harbor paths (/app, /tests, /solution, /logs) really live",
    ),
    Setting(
        "OPENENV_APP_PYTHON",
        "path",
        "",
        "the interpreter `openenv serve` runs a reference env folder's app with (default: its .venv)",
    ),
    Setting("OPENENV_DEBUG", "flag", "0", "the CLI prints the traceback of an error instead of its one line"),
    # ---- files and folders
    Setting("OPENENV_ENVS_PATH", "list", "", "`os.pathsep`-separated folders that hold more envs"),
    Setting(
        "OPENENV_EPISODES_DIR", "path", "artifacts/episodes", "where the eval tools write episode records"
    ),
    # ---- set by openenv on what it starts
    Setting(
        "OPENENV_RUN_ID",
        "marker",
        "",
        "the run a sandbox belongs to (the sweeper removes orphans of other runs)",
    ),
    Setting("OPENENV_SANDBOX", "marker", "", "marks a local sandbox's processes"),
    Setting("OPENENV_PROC", "marker", "", "marks a Docker sandbox's processes"),
)

_BY_NAME = {s.name: s for s in SETTINGS}


def parse_flag(name: str, value: str | None, default: bool) -> bool:
    """The one boolean parser: `value` of variable `name` as a bool (`default` when unset or empty).

    Raises:
        ValueError: a value that is neither true nor false; the message names the variable.
    """
    text = (value or "").strip().lower()
    if not text:
        return default
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f"{name}={value!r} is not a boolean; use 1/true/yes/on or 0/false/no/off")


def flag(name: str, environ: Mapping[str, str] | None = None) -> bool:
    """The declared boolean `name`, read from `environ` (default: the process's environment).

    Raises:
        KeyError: `name` is not a declared flag (declare it in `SETTINGS`).
        ValueError: its value is not a boolean.
    """
    setting = _BY_NAME.get(name)
    if setting is None or setting.kind != "flag":
        raise KeyError(f"{name} is not a declared boolean setting (openenv/settings.py)")
    return parse_flag(name, (os.environ if environ is None else environ).get(name), setting.default == "1")


def markdown_table() -> str:
    """The table of variables in docs/settings.md (users' settings first, markers last)."""
    rows = ["| variable | kind | default | what it does |", "|---|---|---|---|"]
    for s in SETTINGS:
        default = f"`{s.default}`" if s.default else ""
        rows.append(f"| `{s.name}` | {s.kind} | {default} | {s.doc} |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    print(markdown_table(), end="")
