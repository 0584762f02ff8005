#!/bin/sh
# Reference solution: rewrite the fixed file(s) in the workspace.
set -e
cat > config.py <<'EOF'
"""Layered configuration."""


def deep_merge(base, override):
    """Return a new dict: `base` updated by `override`, merging nested dicts recursively."""
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged
EOF
