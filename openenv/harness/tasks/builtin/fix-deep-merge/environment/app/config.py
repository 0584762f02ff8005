"""Layered configuration."""


def deep_merge(base, override):
    """Return a new dict: `base` updated by `override`, merging nested dicts recursively."""
    base.update(override)
    return base
