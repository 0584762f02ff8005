"""What the dialect converters remember between requests: one `DialectState`, sized once, in bytes.

Harnesses resend the whole conversation every turn, so each dialect keeps a body parser that validates
each distinct history item once (`BodyParser`), the canonical form of each item (`ItemMemo`), the
canonical messages made from equal inputs (`ValueMemo`), and the converted history lists a later
request extends (`HistoryMemo`). The converters themselves stay pure functions of their arguments: the
session registry owns one `DialectState` and passes it in, so two proxies in one process share nothing
unless they share a registry, and one number bounds it all.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from openenv.capture.dialects._body import BodyParser, ItemMemo, ValueMemo
from openenv.capture.dialects._history import HistoryMemo

__all__ = ["DEFAULT_MAX_BYTES", "CacheSpec", "DialectCaches", "DialectState"]

M = TypeVar("M", bound=BaseModel)
S = TypeVar("S")
V = TypeVar("V")

DEFAULT_MAX_BYTES = 1536 << 20  # 384 MiB per dialect, what the separate module caches added up to
_DIALECTS = 4  # the budget is split evenly between the dialects of the route registry


@dataclass(frozen=True, slots=True)
class CacheSpec(Generic[M, S, V]):
    """What a dialect's caches are made of (one module constant per dialect).

    Attributes:
        dialect: the dialect's name (one set of caches each).
        model: its request model; `lists`: the JSON names of the list fields worth remembering.
        fold: `(items, values, state, item) -> (state, values)`, the history fold (`HistoryMemo`), given
            this dialect's item and value memos.
        start: the fold's state before the first item; `finish`: values pending after the last.
    """

    dialect: str
    model: type[M]
    lists: tuple[str, ...]
    fold: Callable[[ItemMemo[Any], ValueMemo, S, Any], tuple[S, Sequence[V]]]
    start: S
    finish: Callable[[S], Sequence[V]] | None = None


@dataclass(frozen=True, slots=True, eq=False)
class DialectCaches(Generic[M, S, V]):
    """One dialect's share: its body parser and memos.

    Attributes:
        body: validates request bodies, each distinct history item once.
        items: an item's canonical form, by the item's identity.
        values: canonical messages by their inputs' values (the same object every turn).
        history: converted history lists, continued by a request that extends one.
    """

    body: BodyParser[M]
    items: ItemMemo[Any]
    values: ValueMemo
    history: HistoryMemo[S, V]


class DialectState:
    """Every dialect's caches, made on first use and bounded together by `max_bytes`.

    Args:
        max_bytes: estimated bytes all dialects together may keep (raw item bytes plus the text of the
            canonical values); each dialect gets an equal share, split among its caches.
    """

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self._caches: dict[str, DialectCaches[Any, Any, Any]] = {}
        self._lock = threading.Lock()

    def caches(self, spec: CacheSpec[M, S, V]) -> DialectCaches[M, S, V]:
        """The caches `spec` describes, made on first use."""
        found = self._caches.get(spec.dialect)
        if found is not None:
            return found
        with self._lock:
            if spec.dialect not in self._caches:
                self._caches[spec.dialect] = self._make(spec)
            return self._caches[spec.dialect]

    def clear(self) -> None:
        """Forget everything remembered (the proxy does when its last session has closed and it sat idle:
        what closed sessions sent is worth nothing to the next, and it pinned heap the OS never got back)."""
        with self._lock:
            self._caches = {}

    def _make(self, spec: CacheSpec[M, S, V]) -> DialectCaches[M, S, V]:
        share = (
            self.max_bytes // _DIALECTS
        )  # split 1/6 items, 1/3 lists, 1/6 item memo, 1/4 history, 1/12 values
        body = BodyParser(spec.model, lists=spec.lists, item_bytes=share // 6, history_bytes=share // 3)
        items: ItemMemo[Any] = ItemMemo(max_bytes=share // 6)
        values = ValueMemo(max_bytes=share // 12)
        history = HistoryMemo(
            functools.partial(spec.fold, items, values), spec.start, finish=spec.finish, max_bytes=share // 4
        )
        return DialectCaches(body, items, values, history)
