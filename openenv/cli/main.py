"""The `openenv` command: one typer app, with each command family registered by its own module."""

from __future__ import annotations

import importlib

import typer

from openenv.cli._errors import guard
from openenv.cli._help import reflow_app

__all__ = ["app", "main"]

app = typer.Typer(
    name="openenv",
    help="Run coding-agent harnesses as RL environments, capture their exact tokens, serve and train.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# Each module exposes `register(app)`; heavy imports stay inside the command bodies so `--help` is fast.
_COMMAND_MODULES = (
    "envs",
    "proxy",
    "journal",
    "harness",
    "harness_check",
    "docker",
    "publish",
    "view",
    "export",
    "eval",
    "train",
    "soak",
)

for _name in _COMMAND_MODULES:
    try:
        _module = importlib.import_module(f"openenv.cli.{_name}")
    except ModuleNotFoundError as exc:  # a command family not built yet
        if exc.name != f"openenv.cli.{_name}":
            raise
        continue
    _module.register(app)
reflow_app(app)


def main() -> None:
    """Console-script entry point: a failure is one line and an exit code, never a traceback."""
    guard(app)


if __name__ == "__main__":
    main()
