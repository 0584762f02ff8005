#!/bin/sh
# Reference solution: rewrite the fixed file(s) in the workspace.
set -e
cat > text_utils.py <<'EOF'
"""Helpers for turning titles into URL parts."""

import re


def slugify(text):
    """Return a URL slug for `text`, e.g. "Hello, World!" -> "hello-world"."""
    return "-".join(re.findall(r"[a-z0-9]+", text.lower()))
EOF
