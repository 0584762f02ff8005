"""`openenv export`: trajectory logs -> a Hugging Face dataset (save_to_disk and parquet), for RL or SFT."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

__all__ = ["register"]

_err = Console(stderr=True)


def export(
    paths: Annotated[list[Path], typer.Argument(help="trajectory .jsonl files or folders of them")],
    out: Annotated[Path, typer.Option(help="dataset folder")] = Path("artifacts/dataset"),
    shape: Annotated[list[str], typer.Option(help="tokens (RL rows), messages (SFT rows); repeat for both")]
    = ["tokens"],  # noqa: B006 - typer reads the default, never mutates it
) -> None:
    """Write `OUT/<shape>/` (datasets.save_to_disk) and `OUT/<shape>.parquet` for each --shape."""
    from openenv.errors import OpenEnvError
    from openenv.export import export_episodes, find_logs, read_episode

    bad = sorted(set(shape) - {"tokens", "messages"})
    if bad:
        _err.print(f"[red]error:[/] --shape is tokens or messages, got {bad}")
        raise typer.Exit(2)
    try:
        logs = [read_episode(p) for p in find_logs(paths)]
        for s in shape:
            result = export_episodes(logs, out, shape=s)  # type: ignore[arg-type]
            typer.echo(f"{s}: {result.rows} rows from {len(logs)} episode(s) -> {result.disk_path} and "
                       f"{result.parquet_path}")
    except OpenEnvError as exc:
        _err.print(f"[red]error:[/] {exc.message}")
        raise typer.Exit(1) from None


def register(app: typer.Typer) -> None:
    app.command("export")(export)
