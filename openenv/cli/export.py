"""`openenv export`: trajectory logs -> a Hugging Face dataset (save_to_disk and parquet), for RL or SFT."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

__all__ = ["export", "register"]

_err = Console(stderr=True)


def export(
    paths: Annotated[list[Path], typer.Argument(help="trajectory .jsonl files or folders of them")],
    out: Annotated[Path, typer.Option(help="dataset folder")] = Path("artifacts/dataset"),
    shape: Annotated[
        list[str], typer.Option(help="tokens (RL rows), messages (SFT rows); repeat for both")
    ] = ["tokens"],  # noqa: B006 - typer reads the default, never mutates it
    strict: Annotated[
        bool, typer.Option("--strict", help="fail on any bad log instead of skipping it")
    ] = False,
) -> None:
    """Write `OUT/<shape>/` (datasets.save_to_disk) and `OUT/<shape>.parquet` for each --shape.

    A bad log (truncated, not JSON, no summary line) is skipped and listed on stderr; the rest is exported.
    """
    from openenv.errors import OpenEnvError
    from openenv.export import export_episodes, find_logs, read_episodes

    bad = sorted(set(shape) - {"tokens", "messages"})
    if bad:
        _err.print(f"[red]error:[/] --shape is tokens or messages, got {bad}")
        raise typer.Exit(2)
    try:
        logs, skipped = read_episodes(find_logs(paths))
        for s in skipped:
            _err.print(f"[yellow]skipped[/] {s.path}: {s.reason}", highlight=False, soft_wrap=True)
        if skipped and (strict or not logs):
            why = "--strict" if strict else "no good log is left"
            _err.print(f"[red]error:[/] {len(skipped)} bad log(s) and {why}; nothing exported")
            raise typer.Exit(1)
        for s in shape:
            result = export_episodes(logs, out, shape=s)  # type: ignore[arg-type]  # a CLI str; export_episodes validates it against its Literal
            typer.echo(
                f"{s}: {result.rows} rows from {len(logs)} episode(s) -> {result.disk_path} and "
                f"{result.parquet_path}" + (f" ({len(skipped)} bad log(s) skipped)" if skipped else "")
            )
    except OpenEnvError as exc:
        _err.print(f"[red]error:[/] {exc.message}")
        raise typer.Exit(1) from None


def register(app: typer.Typer) -> None:
    app.command("export")(export)
