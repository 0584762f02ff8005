"""openenv: real coding-agent harnesses as Gym-style RL environments with token-exact capture.

`from openenv import AutoEnv` is the short way to `openenv.auto.AutoEnv` (imported on first use, so
`import openenv` and `openenv --help` stay light).
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"
__all__ = ["AutoEnv", "__version__"]


def __getattr__(name: str) -> Any:
    if name == "AutoEnv":
        from openenv.auto import AutoEnv

        return AutoEnv
    raise AttributeError(f"module 'openenv' has no attribute {name!r}")
