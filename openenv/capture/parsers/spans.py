"""Tool-call attempts located in tokens: a parser reports character spans of the decoded completion,
the trajectory needs token spans (to see which sampled tokens wrote a malformed call)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from openenv.capture.canonical import ToolCallAttempt
from openenv.capture.parsers.base import CallAttempt

__all__ = ["token_spans"]


def token_spans(
    attempts: Sequence[CallAttempt], ids: Sequence[int], decode: Callable[[Sequence[int]], str]
) -> tuple[ToolCallAttempt, ...]:
    """Each attempt with `token_start` = the token holding its first character and `token_end` = one past
    the token holding its last, found by binary search over decoded prefixes (O(log n) decodes each).

    A token that decodes to a partial UTF-8 character still advances the prefix length, so spans stay
    monotonic; they cover the attempt, possibly one token wider at a multi-byte boundary.
    """
    lengths: dict[int, int] = {0: 0}

    def length(k: int) -> int:
        if k not in lengths:
            lengths[k] = len(decode(ids[:k]))
        return lengths[k]

    def first_reaching(chars: int) -> int:  # smallest k with length(k) >= chars
        lo, hi = 0, len(ids)
        while lo < hi:
            mid = (lo + hi) // 2
            if length(mid) >= chars:
                hi = mid
            else:
                lo = mid + 1
        return lo

    spans = []
    for a in attempts:
        start = max(first_reaching(a.start + 1) - 1, 0)
        end = max(first_reaching(a.end), start + 1) if a.end > a.start else start
        spans.append(
            ToolCallAttempt(status=a.status, token_start=start, token_end=min(end, len(ids)), calls=a.calls)
        )
    return tuple(spans)
