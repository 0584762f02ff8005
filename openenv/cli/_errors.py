"""How a command fails: one `error:` line saying what happened and what to do, a non-zero exit code.

No traceback reaches a user: `guard()` wraps the whole CLI and turns a missing optional dependency into
the install line of its extra, and anything else unexpected into its type and message (set
OPENENV_DEBUG=1 to see the traceback). Exit codes: 1 a failure (an episode that ended in `error`
included), 2 a usage error (a bad option, an unknown name).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import NoReturn

import typer

from openenv.extras import extra_for_module, install_hint
from openenv.settings import flag

__all__ = ["fail", "guard", "one_line"]


def one_line(text: object, limit: int = 2000) -> str:
    """`text` on one line (newlines folded), cut to `limit` characters."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def fail(message: str, hint: str | None = None, *, code: int = 1) -> NoReturn:
    """Print `error: message` (and `hint` on a second line) to stderr and exit with `code`."""
    typer.echo(f"error: {one_line(message)}", err=True)
    if hint:
        typer.echo(one_line(hint), err=True)
    raise typer.Exit(code)


def guard(run: Callable[[], object]) -> None:
    """Run the CLI; an exception that escapes a command becomes one line (two with its fix) and exit 1."""
    try:
        run()
    except ModuleNotFoundError as exc:
        if flag("OPENENV_DEBUG"):
            raise
        extra = extra_for_module(exc.name or "")
        _print(
            f"error: this command needs the Python package {exc.name!r}, which is not installed",
            f"install it with: {install_hint(extra)}"
            if extra
            else f"install it with: pip install {exc.name}",
        )
        sys.exit(1)
    except Exception as exc:
        if flag("OPENENV_DEBUG"):
            raise
        from openenv.errors import OpenEnvError

        if isinstance(exc, OpenEnvError):  # ours, worded for the user already
            _print(f"error: {one_line(exc.message)}")
        else:
            _print(
                f"error: {one_line(f'{type(exc).__name__}: {exc}')}",
                "(an unexpected failure; set OPENENV_DEBUG=1 to see where it came from)",
            )
        sys.exit(1)


def _print(*lines: str) -> None:
    for line in lines:
        print(line, file=sys.stderr)
