"""Helpers for turning titles into URL parts."""


def slugify(text):
    """Return a URL slug for `text`, e.g. "Hello, World!" -> "hello-world"."""
    raise NotImplementedError
