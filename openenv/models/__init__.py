"""Models openenv builds itself: the deterministic tiny chat model (`openenv.models.tiny`).

`tiny_model_path` is imported lazily, so `python -m openenv.models.tiny` runs the module only once.
"""

from __future__ import annotations

from typing import Any

__all__ = ["tiny_model_path"]


def __getattr__(name: str) -> Any:
    if name == "tiny_model_path":
        from openenv.models.tiny import tiny_model_path

        return tiny_model_path
    raise AttributeError(f"module 'openenv.models' has no attribute {name!r}")
