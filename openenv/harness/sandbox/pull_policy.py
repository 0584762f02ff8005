"""When a task's image is fetched: Docker's pull policy, shared by the Docker sandbox (`pull.py`) and the
daemonless image roots of the local sandbox (`rootfs.py`), with no Docker SDK import so the latter stays
usable where no engine or SDK is.
"""

from __future__ import annotations

import os
from typing import Literal, cast, get_args

from openenv.errors import BadRequest

__all__ = ["PULL_ENV", "PullPolicy", "pull_policy"]

PullPolicy = Literal["missing", "always", "never"]
PULL_ENV = "OPENENV_PULL"


def pull_policy(value: str | None = None) -> PullPolicy:
    """`value`, else `$OPENENV_PULL`, else `missing` (Docker's default), checked.

    Raises:
        BadRequest: not one of missing, always, never (the message names where it came from).
    """
    chosen = (value or os.environ.get(PULL_ENV) or "missing").strip().lower()
    if chosen not in get_args(PullPolicy):
        where = "--pull" if value else PULL_ENV
        raise BadRequest(f"{where} must be one of missing, always, never; got {chosen!r}")
    return cast(PullPolicy, chosen)  # a str checked against the policy names just above
