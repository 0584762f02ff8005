#!/bin/sh
# Reference solution: rewrite the fixed file(s) in the workspace.
set -e
cat > nested.py <<'EOF'
"""Flatten nested sequences."""

from collections.abc import Iterable


def flatten(value):
    """Yield the leaves of nested lists/tuples, in order."""
    for item in value:
        if isinstance(item, Iterable) and not isinstance(item, (str, bytes)):
            yield from flatten(item)
        else:
            yield item
EOF
