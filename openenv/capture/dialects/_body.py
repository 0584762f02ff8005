"""Request bodies validated with each distinct history item (message, tool) validated only once.

Harnesses resend the whole conversation on every turn, so a turn's body is mostly items the proxy
has already seen. `BodyParser` reads the body once with msgspec into the raw JSON of each top-level
field and of each item of the long lists (`msgspec.Raw`, no decoding; ~1 us per kB, the one cost
that must follow the body's size). A list that extends one it has parsed before (the previous
turn's history plus the new messages) is found by probing its last few items and checked with one
byte comparison of the remembered items (C speed, ~5 us for 135 kB); only the items after that
prefix are looked up by their exact bytes, and only unseen ones are validated. The request model is
then built without re-checking the items where no validator could tell. A turn's Python work follows
its new items, not the length of the conversation, and the same item bytes give the same item
object, so later steps can compare history by identity.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import msgspec
from annotated_types import MinLen
from pydantic import BaseModel, TypeAdapter, ValidationError

from openenv.capture.dialects._shared import parse_body
from openenv.capture.fast_paths import fast_paths

__all__ = ["BodyParser", "ItemMemo", "ValueMemo", "canonical_bytes"]

M = TypeVar("M", bound=BaseModel)
V = TypeVar("V")

_FIELDS = msgspec.json.Decoder(dict[str, msgspec.Raw])
_ITEMS = msgspec.json.Decoder(list[msgspec.Raw])
_VALUE = msgspec.json.Decoder()
# Sizes in bytes come from `DialectState` (one budget for every dialect); the counts below only cap how
# many small entries a byte budget may hold (each entry costs a few hundred bytes of Python objects).
_SIZE = 16384  # distinct items kept per parser, shared by all sessions (~30 turns x 2 items x 256 sessions)
_HISTORIES = 4096  # parsed lists kept to be extended (a conversation keeps only its newest)
_PROBES = 16  # how far from a list's end its known prefix may stop (the items one turn adds)
_BIG_ITEM = 1 << 20  # an item with more raw bytes than this is validated each time, never kept


@dataclass(frozen=True, slots=True)
class _History:
    """A parsed list: its items' raw JSON (own copies, not views of a body) and their models."""

    raws: list[msgspec.Raw]
    items: list[Any]
    size: int = 0  # bytes of raws


class BodyParser(Generic[M]):
    """Validates raw bodies into `model`, remembering the validated items of its list fields.

    Args:
        model: the dialect's request model.
        lists: the JSON names of its list fields worth remembering (the history and the tools).
        size: how many distinct items to keep (least recently used go first).
        histories: how many parsed lists to keep for later requests to extend.
        item_bytes: raw bytes of the distinct items kept (their models hold about as much again).
        history_bytes: raw bytes of the remembered lists.

    Attributes:
        hits: items served from memory; `misses`: items validated; `lookups`: items looked up one by
            one (those after a remembered prefix).
    """

    def __init__(
        self,
        model: type[M],
        *,
        lists: tuple[str, ...],
        size: int = _SIZE,
        histories: int = _HISTORIES,
        item_bytes: int = 64 << 20,
        history_bytes: int = 128 << 20,
    ) -> None:
        self.model = model
        self.size = size
        self.histories = histories
        self.item_bytes = item_bytes
        self.history_bytes = history_bytes
        # OPENENV_FAST_PATHS=0: every body is validated by plain pydantic (`parse_body`), nothing kept.
        self.fast = fast_paths()
        self._adapters = {name: TypeAdapter(_item_type(model, name)) for name in lists}
        self._keys = _keys(model)
        self._trusted = _trusted_lists(model, lists) if self.fast else {}  # JSON name -> field name
        self._split = _splitter(self._keys, lists)
        self._items: OrderedDict[tuple[str, bytes], Any] = OrderedDict()
        self._ends: OrderedDict[tuple[str, bytes], _History] = OrderedDict()  # keyed by the last item
        self._item_bytes = 0
        self._history_bytes = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0
        self.lookups = 0

    def parse(self, body: bytes) -> M:
        """The validated request.

        Raises:
            BadRequest: as `parse_body` (the body is empty, not JSON, or does not fit the model).
        """
        fast = self._fast(body) if self.fast else None
        return fast if fast is not None else parse_body(self.model, body)

    def _fast(self, body: bytes) -> M | None:
        try:
            return self._validate(self._fields(body))
        except (msgspec.DecodeError, ValidationError):
            return None

    def _validate(self, data: dict[str, Any]) -> M:
        """The request model from fields whose list items are validated already. Where no validator
        or constraint could tell (`_trusted_lists`), the lists stand in as their last item and are put
        back after: validating a list re-checks each item, ~0.9 us each, the one cost left that grew
        with the conversation (113 us of a 60-turn parse)."""
        lists = {key: data[key] for key in self._trusted if isinstance(data.get(key), list) and data[key]}
        if not lists:
            return self.model.model_validate(data)
        req = self.model.model_validate({**data, **{key: items[-1:] for key, items in lists.items()}})
        for key, items in lists.items():
            setattr(req, self._trusted[key], list(items))  # its own list: the remembered one stays intact
        return req

    def _fields(self, body: bytes) -> dict[str, Any]:
        """The body's fields by JSON name, list fields as validated items. The body is read once when
        every key is one of the model's; an unknown key (a vendor extra) or a string where a list may
        stand costs a second, general read."""
        try:
            split = self._split.decode(body)
        except msgspec.ValidationError:
            fields = _FIELDS.decode(body)
            return {
                name: self._list(name, raw) if name in self._adapters else _VALUE.decode(raw)
                for name, raw in fields.items()
            }
        values = ((key, getattr(split, attr)) for attr, key in self._keys)
        return {key: self._value(key, value) for key, value in values if value is not msgspec.UNSET}

    def _value(self, key: str, value: Any) -> Any:
        if key not in self._adapters:
            return _VALUE.decode(value)
        return None if value is None else self._validated(key, value)

    def _list(self, name: str, raw: msgspec.Raw) -> Any:
        """The field's items as validated models; a value that is not a list is decoded as is."""
        try:
            raws = _ITEMS.decode(raw)
        except msgspec.ValidationError:
            return _VALUE.decode(raw)
        return self._validated(name, raws)

    def _validated(self, name: str, raws: list[msgspec.Raw]) -> list[Any]:
        with self._lock:  # proxies in several threads of one process share the dialect's parser
            known = self._known(name, raws)
            start = len(known.raws) if known is not None else 0
            new = [self._item(name, bytes(item)) for item in raws[start:]]
            self.hits += start
            self.lookups += len(new)
            if known is None or new:
                known = self._remember(name, known, raws[start:], new)
            return known.items

    def _known(self, name: str, raws: list[msgspec.Raw]) -> _History | None:
        """The longest remembered list that `raws` starts with, probing its last few items."""
        for end in range(len(raws), max(len(raws) - _PROBES, 0), -1):
            hit = self._ends.get((name, bytes(raws[end - 1])))
            if hit is not None and len(hit.raws) == end and raws[:end] == hit.raws:
                self._ends.move_to_end((name, bytes(raws[end - 1])))
                return hit
        return None

    def _remember(
        self, name: str, known: _History | None, raws: list[msgspec.Raw], items: list[Any]
    ) -> _History:
        own = [raw.copy() for raw in raws]  # a view would keep the whole request body alive
        added = sum(len(raw) for raw in own)
        if known is None:
            history = _History(own, items, added)
        else:
            history = _History(known.raws + own, known.items + items, known.size + added)
            self._forget(
                name, known
            )  # superseded: one list per conversation, not one per turn (O(n), not n^2)
        if history.raws and history.size <= self.history_bytes // 8:
            key = (name, bytes(history.raws[-1]))
            replaced = self._ends.pop(key, None)
            self._history_bytes += history.size - (replaced.size if replaced is not None else 0)
            self._ends[key] = history
            while len(self._ends) > self.histories or self._history_bytes > self.history_bytes:
                self._history_bytes -= self._ends.popitem(last=False)[1].size
        return history

    def _forget(self, name: str, history: _History) -> None:
        """Drop a list that a longer one extends. A request that forks from it later (a sub-agent, a
        lagging rollout of the same group) pays one lookup per item, once."""
        key = (name, bytes(history.raws[-1]))
        if self._ends.get(key) is history:
            del self._ends[key]
            self._history_bytes -= history.size

    def _item(self, name: str, raw: bytes) -> Any:
        key = (name, raw)
        item = self._items.get(key)
        if item is not None:
            self.hits += 1
            self._items.move_to_end(key)
            return item
        self.misses += 1
        item = self._adapters[name].validate_json(raw)
        if len(raw) <= _BIG_ITEM:
            self._items[key] = item
            self._item_bytes += len(raw)
            while len(self._items) > self.size or self._item_bytes > self.item_bytes:
                self._item_bytes -= len(self._items.popitem(last=False)[0][1])
        return item


class ItemMemo(Generic[V]):
    """Values derived from parsed items (their canonical form), remembered by the item's identity.

    `BodyParser` gives the same bytes the same item object, so a resent history converts at the
    cost of a dict lookup per item. An entry holds its item, so no other object can take its id.
    """

    def __init__(self, size: int = 2 * _SIZE, max_bytes: int = 64 << 20) -> None:
        self.size = size
        self.max_bytes = max_bytes
        self._values: dict[tuple[int, Hashable], tuple[object, V]] = {}
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, item: object, make: Callable[[], V], extra: Hashable = None) -> V:
        """`make()` for this item (and `extra`, what else the value depends on), made once. A value
        estimated over an eighth of `max_bytes` is made each time, not kept."""
        key = (id(item), extra)
        with self._lock:  # the proxies of several threads may share one `DialectState`
            hit = self._values.get(key)
        if hit is not None and hit[0] is item:
            return hit[1]
        value = make()
        cost = canonical_bytes(value)
        if cost > self.max_bytes // 8:
            return value
        with self._lock:
            old = self._values.pop(key, None)
            self._bytes += cost - (canonical_bytes(old[1]) if old is not None else 0)
            self._values[key] = (item, value)
            while len(self._values) > self.size or self._bytes > self.max_bytes:
                self._bytes -= canonical_bytes(self._values.pop(next(iter(self._values)))[1])
        return value


class ValueMemo:
    """Canonical values made once per distinct key (their inputs, by value), so the same text gives the
    same message object every turn, whichever item it came from; least recently used go first.
    """

    def __init__(self, max_bytes: int = 32 << 20, size: int = _SIZE) -> None:
        self.size = size
        self.max_bytes = max_bytes
        self._values: OrderedDict[Hashable, Any] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: Hashable, make: Callable[[], V]) -> V:
        """`make()` for `key`, made once while it is remembered."""
        with self._lock:
            if key in self._values:
                self._values.move_to_end(key)
                return self._values[key]
        value = make()
        cost = canonical_bytes(value)
        if cost > self.max_bytes // 8:
            return value
        with self._lock:
            if key not in self._values:
                self._values[key] = value
                self._bytes += cost
            while len(self._values) > self.size or self._bytes > self.max_bytes:
                self._bytes -= canonical_bytes(self._values.popitem(last=False)[1])
            return self._values.get(key, value)


def canonical_bytes(value: Any) -> int:
    """About how many bytes of text a canonical value holds (a message, a tool, or a tuple of them):
    what a memo of converted values is bounded by."""
    if isinstance(value, tuple | list):
        return sum(canonical_bytes(v) for v in value)
    parts = getattr(value, "parts", None)
    if parts is None:
        return 64 + len(getattr(value, "description", "") or "")
    total = 64
    for part in parts:
        total += len(getattr(part, "text", None) or getattr(part, "content", None) or "")
        total += len(getattr(part, "arguments", None) or "")
    return total


def _keys(model: type[BaseModel]) -> list[tuple[str, str]]:
    """(struct attribute, JSON key) for every key that names one of the model's fields: its name,
    its alias, its validation alias (a body may use any; the model sorts them out)."""
    keys: dict[str, None] = {}
    for name, info in model.model_fields.items():
        for key in (name, info.alias, info.validation_alias):
            if isinstance(key, str):
                keys[key] = None
    return [(f"f{i}", key) for i, key in enumerate(keys)]


def _splitter(keys: list[tuple[str, str]], lists: tuple[str, ...]) -> msgspec.json.Decoder[Any]:
    """A one-pass decoder of a body whose keys are all the model's: list fields as raw items, the
    others raw; any other key fails it (so nothing is dropped)."""
    fields = [
        (attr, (list[msgspec.Raw] | None if key in lists else msgspec.Raw) | msgspec.UnsetType, msgspec.UNSET)
        for attr, key in keys
    ]
    struct = msgspec.defstruct("Split", fields, rename=dict(keys), forbid_unknown_fields=True)
    return msgspec.json.Decoder(struct)


def _trusted_lists(model: type[BaseModel], lists: tuple[str, ...]) -> dict[str, str]:
    """The list fields (JSON name -> field name) whose validation does nothing but validate each
    item: no validator reads them (no model validator at all), no constraint beyond `min_length`
    <= 1, and the model lets a field be set without validation."""
    decorators = model.__pydantic_decorators__
    if (
        decorators.model_validators
        or model.model_config.get("frozen")
        or model.model_config.get("validate_assignment")
    ):
        return {}
    watched = {f for d in decorators.field_validators.values() for f in d.info.fields}
    out = {}
    for name, info in model.model_fields.items():
        key = next(
            (k for k in (info.validation_alias, info.alias, name) if isinstance(k, str) and k in lists), None
        )
        if key is None or name in watched or "*" in watched:
            continue
        if all(isinstance(m, MinLen) and m.min_length <= 1 for m in info.metadata):
            out[key] = name
    return out


def _item_type(model: type[BaseModel], name: str) -> Any:
    """The item type of the list field whose JSON name (or alias) is `name`."""
    for field_name, info in model.model_fields.items():
        if name in (field_name, info.alias):
            for arg in _list_args(info.annotation):
                return arg
    raise ValueError(f"{model.__name__} has no list field {name!r}")


def _list_args(annotation: Any) -> list[Any]:
    """Item types of the `list[X]` members of an annotation (`list[X] | None`, `str | list[X]`)."""
    origin = getattr(annotation, "__origin__", None)
    if origin is list:
        return [annotation.__args__[0]]
    return [arg for member in getattr(annotation, "__args__", ()) for arg in _list_args(member)]
