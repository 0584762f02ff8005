"""What a Harbor task's `environment/Dockerfile` puts where, read without building it.

A task folder's starting files are whatever its Dockerfile copies from the build context (`COPY app/
/app/`), and the agent works in its last `WORKDIR`. Reading that statically lets a sandbox without an
image build (the local one, or Docker for a Dockerfile that only copies files) lay out the same files
at the same paths. Steps that cannot be reproduced by copying files (`RUN`, `ADD` of a URL, `COPY
--from` a build stage) are listed, so the caller can refuse honestly instead of starting the agent in a
different world than Harbor would.
"""

from __future__ import annotations

import fnmatch
import json
import posixpath
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from openenv.errors import BadRequest

__all__ = ["DockerfilePlan", "parse_dockerfile"]


@dataclass
class DockerfilePlan:
    """The parts of a Dockerfile that decide the agent's starting state.

    `files` maps absolute container paths to context files; `workdir` is the last WORKDIR (Docker's
    default `/`); `unreproducible` lists the instructions only a real build can run, verbatim.
    """

    base_image: str | None = None
    workdir: str = "/"
    files: dict[str, Path] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    unreproducible: list[str] = field(default_factory=list)

    def workspace_files(self, workdir: str | None = None) -> dict[str, Path]:
        """Files under `workdir` (default: the Dockerfile's), keyed by their path relative to it."""
        root = PurePosixPath(workdir or self.workdir)
        return {
            str(PurePosixPath(p).relative_to(root)): src
            for p, src in self.files.items()
            if PurePosixPath(p).is_relative_to(root) and PurePosixPath(p) != root
        }

    def outside_files(self, workdir: str | None = None) -> list[str]:
        """Container paths the Dockerfile fills outside `workdir` (a copy-only sandbox cannot place them)."""
        root = PurePosixPath(workdir or self.workdir)
        return sorted(p for p in self.files if not PurePosixPath(p).is_relative_to(root))


_REF = re.compile(r"\$(?:\{(\w+)\}|(\w+))")


def _expand(text: str, env: dict[str, str]) -> str:
    """`$VAR` / `${VAR}` from the ENV set so far (Docker's substitution; unknown names are empty)."""
    return _REF.sub(lambda m: env.get(m.group(1) or m.group(2), ""), text)


def _ignored(context: Path) -> list[str]:
    """`.dockerignore` patterns (negations are not supported and are skipped)."""
    path = context / ".dockerignore"
    if not path.is_file():
        return []
    lines = (line.strip() for line in path.read_text().splitlines())
    return [line.strip("/") for line in lines if line and not line.startswith(("#", "!"))]


def _pattern(glob: str) -> re.Pattern[str]:
    """A .dockerignore glob as Go's filepath.Match reads it: `*` and `?` stop at `/`, `**` does not."""
    out = "".join(
        ".*" if part == "**" else "[^/]*" if part == "*" else "[^/]" if part == "?" else re.escape(part)
        for part in re.split(r"(\*\*|\*|\?)", glob)
    )
    return re.compile(out + r"\Z")


def _is_ignored(relative: str, patterns: list[str]) -> bool:
    parts = relative.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    return any(_pattern(pattern).match(prefix) for pattern in patterns for prefix in prefixes)


def _logical_lines(text: str) -> list[str]:
    """Instructions with `\\` continuations joined and comments dropped."""
    lines, current = [], ""
    for raw in text.splitlines():
        stripped = raw.strip()
        if not current and (not stripped or stripped.startswith("#")):
            continue
        if current and stripped.startswith("#"):
            continue  # comment lines inside a continuation are removed by Docker too
        if stripped.endswith("\\"):
            current += stripped[:-1].rstrip() + " "
            continue
        lines.append((current + stripped).strip())
        current = ""
    if current.strip():
        lines.append(current.strip())
    return lines


def _arguments(rest: str) -> tuple[list[str], list[str]]:
    """(flags, arguments) of COPY/ADD, in shell form or JSON array form."""
    words = json.loads(rest) if rest.startswith("[") else shlex.split(rest)
    flags = [w for w in words if w.startswith("--")]
    return flags, [w for w in words if not w.startswith("--")]


def _context_sources(context: Path, pattern: str) -> list[Path]:
    pattern = pattern.lstrip("/") or "."
    if any(ch in pattern for ch in "*?["):
        found = [
            p
            for p in sorted(context.rglob("*"))
            if fnmatch.fnmatch(p.relative_to(context).as_posix(), pattern)
        ]
    else:
        found = [context / pattern] if (context / pattern).exists() else []
    for path in found:
        if not path.resolve().is_relative_to(context.resolve()):
            raise BadRequest(f"COPY source {pattern!r} leaves the build context {context}")
    if not found:
        raise BadRequest(f"COPY source {pattern!r} does not exist in the build context {context}")
    return found


def _copy(plan: DockerfilePlan, context: Path, sources: list[str], dest: str) -> None:
    ignored = _ignored(context)
    target = posixpath.normpath(posixpath.join(plan.workdir, dest))
    into_folder = (
        dest.endswith(("/", "/.")) or dest in (".", "..") or len(sources) > 1 or target == plan.workdir
    )
    for pattern in sources:
        for src in _context_sources(context, pattern):
            if src.is_dir():  # a folder's contents go into dest
                for path in sorted(src.rglob("*")):
                    if (
                        path.is_file()
                        and "__pycache__" not in path.parts
                        and not _is_ignored(path.relative_to(context).as_posix(), ignored)
                    ):
                        rel = path.relative_to(src).as_posix()
                        plan.files[posixpath.join(target, rel)] = path
            elif into_folder or any(ch in pattern for ch in "*?["):
                plan.files[posixpath.join(target, src.name)] = src
            else:
                plan.files[target] = src


def parse_dockerfile(dockerfile: Path, context: Path | None = None) -> DockerfilePlan:
    """Read `dockerfile` (build context: `context`, default its folder) into a `DockerfilePlan`.

    Raises:
        BadRequest: a COPY source is missing or leaves the context; the message names it.
    """
    context = context or dockerfile.parent
    plan = DockerfilePlan()
    stages = 0
    for line in _logical_lines(dockerfile.read_text()):
        keyword, _, rest = line.partition(" ")
        keyword, rest = keyword.upper(), rest.strip()
        if keyword == "FROM":
            stages += 1
            words = [w for w in rest.split() if not w.startswith("--")]
            if stages > 1:  # a multi-stage build: only a real build knows the final stage's files
                plan.unreproducible.append(line)
            plan.base_image = words[0] if words else None
        elif keyword == "WORKDIR":
            plan.workdir = posixpath.normpath(
                posixpath.join(plan.workdir, _expand(rest, plan.env).strip("\"'"))
            )
        elif keyword in ("COPY", "ADD"):
            flags, words = _arguments(_expand(rest, plan.env))
            remote = any(w.startswith(("http://", "https://", "git@")) for w in words[:-1])
            archive = keyword == "ADD" and any(
                w.endswith((".tar", ".tar.gz", ".tgz", ".tar.xz")) for w in words
            )
            if any(f.startswith("--from") for f in flags) or remote or archive or len(words) < 2:
                plan.unreproducible.append(line)
                continue
            _copy(plan, context, words[:-1], words[-1])
        elif keyword == "ENV":
            words = shlex.split(_expand(rest, plan.env), posix=True)
            if len(words) >= 2 and "=" not in words[0]:
                plan.env[words[0]] = " ".join(words[1:])
            else:
                plan.env.update(w.split("=", 1) for w in words if "=" in w)
        elif keyword in ("RUN", "ONBUILD"):
            plan.unreproducible.append(line)
    return plan
