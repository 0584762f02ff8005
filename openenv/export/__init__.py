"""Episode logs (trajectory JSONL) and their export to Hugging Face `datasets`.

`log` reads and writes the JSONL an episode leaves behind; `dataset` turns many of them into token rows
for RL or messages rows for SFT.
"""

from __future__ import annotations

from openenv.export.dataset import ExportResult, Shape, export_episodes, messages_rows, token_rows
from openenv.export.log import EpisodeLog, SkippedLog, append_requests, find_logs, read_episode, read_episodes

__all__ = [
    "EpisodeLog",
    "ExportResult",
    "Shape",
    "SkippedLog",
    "append_requests",
    "export_episodes",
    "find_logs",
    "messages_rows",
    "read_episode",
    "read_episodes",
    "token_rows",
]
