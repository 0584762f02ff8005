"""Reading a verifier's reward files the way Harbor reads them, and never the way an agent would like.

Harbor's contract (harbor 0.25.0, `verifier/verifier.py`): `reward.json` (a flat object of finite
numbers) is read if it exists, otherwise `reward.txt` (its whole text parsed as one finite float). No
file, an empty file or an unparsable one is an error: there is no reward, and the exit code of
`test.sh` never stands in for one. Checked against Harbor's own parser on a table of cases
(tests/harness/tasks/test_harbor_crosscheck.py); we are stricter in two places Harbor lets through
by accident: a top-level JSON value that is not an object, and an empty object (no reward at all).

The files live in a folder the graded process could write, so they are opened without following
symlinks (a planted `reward.txt -> /etc/...` link, or a reward folder swapped for a link), must be
regular files (a fifo would block the reader) and are read with a size cap.
"""

from __future__ import annotations

import errno
import json
import math
import os
import stat
from pathlib import Path
from typing import Literal

__all__ = [
    "MAX_REWARD_BYTES",
    "NoReward",
    "RewardStatus",
    "parse_reward_json",
    "parse_reward_text",
    "read_rewards",
]

MAX_REWARD_BYTES = 64 * 1024
# scored: a reward was read. The others are reasons there is none.
RewardStatus = Literal[
    "scored",
    "reward_missing",
    "reward_empty",
    "reward_invalid",
    "verifier_timeout",
    "verifier_error",
]


class NoReward(Exception):
    """The verifier produced no usable reward; `status` says which way, `reason` says what to look at."""

    def __init__(self, status: RewardStatus, reason: str) -> None:
        super().__init__(reason)
        self.status: RewardStatus = status
        self.reason = reason


def _finite(value: object) -> bool:
    # bool is an int to Python and to Harbor: `true` counts as 1.
    return isinstance(value, int | float) and math.isfinite(value)


def parse_reward_json(text: str) -> dict[str, float]:
    """`reward.json`: a flat JSON object whose every value is a finite number.

    Raises:
        NoReward: empty, not JSON, not an object, or a value that is not a finite number (named).
    """
    if not text.strip():
        raise NoReward("reward_empty", "reward.json is empty")
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise NoReward("reward_invalid", f"reward.json is not JSON ({exc})") from None
    if not isinstance(data, dict) or not data:
        raise NoReward("reward_invalid", "reward.json must be a non-empty object of numbers")
    bad = [key for key, value in data.items() if not _finite(value)]
    if bad:
        raise NoReward(
            "reward_invalid", f"reward.json values must be finite numbers; {bad[0]!r} is {data[bad[0]]!r}"
        )
    return {str(key): float(value) for key, value in data.items()}


def parse_reward_text(text: str) -> dict[str, float]:
    """`reward.txt`: one finite float (`1`, `0.5`), surrounding whitespace allowed, as `float()` reads it.

    Raises:
        NoReward: empty, or not a finite number.
    """
    stripped = text.strip()
    if not stripped:
        raise NoReward("reward_empty", "reward.txt is empty")
    try:
        value = float(stripped)
    except ValueError:
        raise NoReward("reward_invalid", f"reward.txt does not hold a number: {stripped[:80]!r}") from None
    if not math.isfinite(value):
        raise NoReward("reward_invalid", f"reward.txt holds {stripped[:80]!r}, not a finite number")
    return {"reward": value}


def _read_capped(dir_fd: int, name: str) -> str | None:
    """The file's text, None when absent; refuses links, non-regular files and oversized files."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise NoReward(
                "reward_invalid", f"{name} is a symbolic link; reward files must be plain files"
            ) from None
        raise NoReward("reward_invalid", f"cannot open {name}: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NoReward("reward_invalid", f"{name} is not a regular file")
        if info.st_size > MAX_REWARD_BYTES:
            raise NoReward("reward_invalid", f"{name} is {info.st_size} bytes (limit {MAX_REWARD_BYTES})")
        data = os.read(fd, MAX_REWARD_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_REWARD_BYTES:
        raise NoReward("reward_invalid", f"{name} is larger than {MAX_REWARD_BYTES} bytes")
    return data.decode("utf-8", "replace")


def read_rewards(folder: Path) -> dict[str, float]:
    """Read `folder/reward.json`, else `folder/reward.txt`, as Harbor does.

    Raises:
        NoReward: neither file exists (`reward_missing`), the folder is a link, or the file present is
            empty or malformed; a malformed `reward.json` is not rescued by a `reward.txt`.
    """
    try:
        dir_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        raise NoReward("reward_missing", f"the reward folder {folder} does not exist") from None
    except OSError as exc:
        raise NoReward(
            "reward_invalid", f"the reward folder {folder} is not a plain folder ({exc.strerror})"
        ) from None
    try:
        text = _read_capped(dir_fd, "reward.json")
        if text is not None:
            return parse_reward_json(text)
        text = _read_capped(dir_fd, "reward.txt")
        if text is not None:
            return parse_reward_text(text)
    finally:
        os.close(dir_fd)
    raise NoReward("reward_missing", "the tests wrote no reward file (reward.json or reward.txt)")
