"""Histories converted to canonical messages once: a resent history continues from where it stopped.

A dialect's history conversion is a left fold over the wire items (messages, contents, input items):
each item becomes canonical messages, and a little state (e.g. which tool a call id belongs to)
carries to the items after it. `BodyParser` gives resent items the same objects, so `HistoryMemo`
remembers each converted list by its items' identities: a request that extends a remembered list
(found by probing its last few items, checked with one identity pass in C) converts only the items
after it. Converting a turn then costs its new items, not the length of the conversation.
"""

from __future__ import annotations

import operator
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from openenv.capture.dialects._body import canonical_bytes

__all__ = ["HistoryMemo"]

S = TypeVar("S")
V = TypeVar("V")

_SIZE = 4096  # converted lists kept per dialect (a conversation keeps only its newest)
_PROBES = 16  # how far from a list's end its known prefix may stop (the items one turn adds)


@dataclass(frozen=True, slots=True)
class _Converted(Generic[S, V]):
    items: tuple[Any, ...]  # holds the items, so no other object can take their ids
    values: tuple[V, ...]
    state: S
    size: int = 0  # estimated text bytes of values (`canonical_bytes`)


class HistoryMemo(Generic[S, V]):
    """`fold` over a list of items, continued from the longest remembered list it extends.

    Args:
        fold: `(state, item) -> (state, values)`: an item's canonical values and the state after it.
            It must not mutate `state` (a remembered state is shared by every list that extends it).
        start: the state before the first item.
        finish: the values still pending in the state after the last item (an assistant turn not
            yet closed by a later item); they end this list's values but are not remembered.
        size: how many converted lists to keep (least recently used go first).
        max_bytes: estimated text bytes of the converted lists kept (`DialectState` sets it).

    Attributes:
        folded: items folded, not served from a remembered list (for tests and benchmarks).
    """

    def __init__(
        self,
        fold: Callable[[S, Any], tuple[S, Sequence[V]]],
        start: S,
        *,
        finish: Callable[[S], Sequence[V]] | None = None,
        size: int = _SIZE,
        max_bytes: int = 128 << 20,
    ) -> None:
        self._fold = fold
        self._start = start
        self._finish = finish
        self.size = size
        self.max_bytes = max_bytes
        self._lists: OrderedDict[int, _Converted[S, V]] = OrderedDict()  # keyed by id(last item)
        self._bytes = 0
        self._lock = threading.Lock()
        self.folded = 0

    def convert(self, items: Sequence[Any]) -> tuple[V, ...]:
        """The values of every item, in order (the fold's outputs concatenated)."""
        with self._lock:  # the proxies of several threads may share one `DialectState`
            converted = self._converted(items)
        if converted is None:
            return ()
        pending = self._finish(converted.state) if self._finish is not None else ()
        return converted.values + tuple(pending) if pending else converted.values

    def _converted(self, items: Sequence[Any]) -> _Converted[S, V] | None:
        known = self._known(items)
        done = len(known.items) if known is not None else 0
        if done == len(items):
            return known
        values, state = (known.values, known.state) if known is not None else ((), self._start)
        new: list[V] = []
        for item in items[done:]:
            state, out = self._fold(state, item)
            new.extend(out)
        self.folded += len(items) - done
        size = (known.size if known is not None else 0) + canonical_bytes(new)
        converted = _Converted(tuple(items), values + tuple(new), state, size)
        if known is not None and self._lists.get(id(known.items[-1])) is known:
            # Superseded: one list per conversation, not one per turn (memory O(n), not n^2). A request
            # that forks from it later (a sub-agent, a lagging rollout of a group) folds from the start once.
            del self._lists[id(known.items[-1])]
            self._bytes -= known.size
        if size > self.max_bytes // 8:
            return converted  # one huge conversation is converted each time rather than pin an eighth
        replaced = self._lists.pop(id(items[-1]), None)
        self._bytes += size - (replaced.size if replaced is not None else 0)
        self._lists[id(items[-1])] = converted
        while len(self._lists) > self.size or self._bytes > self.max_bytes:
            self._bytes -= self._lists.popitem(last=False)[1].size
        return converted

    def _known(self, items: Sequence[Any]) -> _Converted[S, V] | None:
        """The longest remembered list that `items` starts with (the same objects, in order)."""
        for end in range(len(items), max(len(items) - _PROBES, 0), -1):
            hit = self._lists.get(id(items[end - 1]))
            if hit is not None and len(hit.items) == end and all(map(operator.is_, hit.items, items)):
                self._lists.move_to_end(id(items[end - 1]))
                return hit
        return None
