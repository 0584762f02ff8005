"""Flatten nested sequences."""

from collections.abc import Iterable


def flatten(value):
    """Yield the leaves of nested lists/tuples, in order."""
    for item in value:
        if isinstance(item, Iterable):
            yield from flatten(item)
        else:
            yield item
