"""`openenv journal`: read capture journals back (the sessions a killed or stopped proxy recorded)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

__all__ = ["rebuild_cmd", "register"]

_err = Console(stderr=True)
journal_app = typer.Typer(
    help="Capture journals: each proxy session's turns, written before each reply.", no_args_is_help=True
)


@journal_app.command("rebuild")
def rebuild_cmd(
    paths: Annotated[list[Path], typer.Argument(help="journal .jsonl files, or folders of them")],
    out: Annotated[Path | None, typer.Option(help="write the rows here as JSONL (default: stdout)")] = None,
) -> None:
    """Rebuild each session's training sequences (prompt_ids, completion_ids, logprobs, env_mask) from its
    journal, one JSON row per sequence with the journal's id; a summary per session goes to stderr."""
    import msgspec

    from openenv.capture.journal import find_journals, rebuild_rows
    from openenv.errors import OpenEnvError

    try:
        files = list(find_journals(paths))
    except OpenEnvError as exc:
        _err.print(f"[red]error:[/] {exc.message}")
        raise typer.Exit(1) from None
    if not files:
        _err.print(f"[red]error:[/] no journal files in {', '.join(map(str, paths))}")
        raise typer.Exit(1)
    sink = out.open("wb") if out is not None else sys.stdout.buffer
    bad = 0
    try:
        for path in files:
            try:
                rows, stats, contents = rebuild_rows(path)
            except (OpenEnvError, OSError, KeyError, IndexError, TypeError) as exc:
                bad += 1
                _err.print(
                    f"[yellow]skipped[/] {path}: {getattr(exc, 'message', None) or type(exc).__name__}"
                )
                continue
            journal_id = contents.header.get("id", path.stem)
            for row in rows:
                sink.write(msgspec.json.encode({"journal": journal_id, **row.model_dump()}) + b"\n")
            state = f"closed ({contents.closed})" if contents.closed else "not closed (the proxy died)"
            cut = f", {len(contents.bad_lines)} unreadable line(s) skipped" if contents.bad_lines else ""
            _err.print(f"{path.name}: {stats.turns} turns, {stats.sequences} sequence(s), {state}{cut}")
    finally:
        if out is not None:
            sink.close()
    if bad:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.add_typer(journal_app, name="journal")
