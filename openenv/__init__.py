"""openenv: real coding-agent harnesses as Gym-style RL environments with token-exact capture.

`from openenv import AutoEnv` is the short way to `openenv.auto.AutoEnv` (imported on first use, so
`import openenv` and `openenv --help` stay light).

The distribution is `openenv-harness`; Hugging Face's OpenEnv also imports as `openenv`. Before anything
else, this folder is checked for files of another distribution (`openenv/distribution.py`): a mixed
package fails here with one line that says which and what to do.
"""

from __future__ import annotations

import os
from typing import Any

from openenv.distribution import check_no_clash

check_no_clash(os.path.dirname(__file__))

__version__ = "0.1.0"
__all__ = ["AutoEnv", "__version__"]


def __getattr__(name: str) -> Any:
    if name == "AutoEnv":
        from openenv.auto import AutoEnv

        return AutoEnv
    raise AttributeError(f"module 'openenv' has no attribute {name!r}")
