"""Command help that reads as prose at any terminal width.

Our commands' help is their docstring, wrapped at the source's line length. Typer (0.2x) keeps those single
line breaks and then wraps again at the terminal's width, so at 80 or 100 columns a sentence breaks after
two words. `reflow` joins the lines of each prose paragraph (the terminal wraps it once, cleanly) and keeps
lists, indented blocks and click's `\\b` paragraphs line for line.
"""

from __future__ import annotations

import inspect
import re

import typer

__all__ = ["reflow", "reflow_app"]

_KEEP_LINES = re.compile(r"^(\s|[-*•] |\d+[.)] |\x08)")


def reflow(text: str) -> str:
    """`text` with each prose paragraph on one line; list-like or indented paragraphs untouched."""
    paragraphs = inspect.cleandoc(text).split("\n\n")
    out = []
    for paragraph in paragraphs:
        lines = paragraph.split("\n")
        if any(_KEEP_LINES.match(line) for line in lines[1:]) or paragraph.startswith("\b"):
            out.append(paragraph)
        else:
            out.append(" ".join(line.strip() for line in lines))
    return "\n\n".join(out)


def reflow_app(app: typer.Typer) -> None:
    """Reflow the help of every command registered on `app` and its sub-apps (before click is built)."""
    for info in app.registered_commands:
        doc = info.help if isinstance(info.help, str) else inspect.getdoc(info.callback)
        if doc:
            info.help = reflow(doc)
    for group in app.registered_groups:
        if group.typer_instance is not None:
            reflow_app(group.typer_instance)
