#!/bin/sh
# Reference solution: rewrite the fixed file(s) in the workspace.
set -e
cat > tags.py <<'EOF'
"""Tag bookkeeping for notes."""


def add_tag(tag, tags=None):
    """Append `tag` to `tags` (a new list when omitted) unless already present; return the list."""
    if tags is None:
        tags = []
    if tag not in tags:
        tags.append(tag)
    return tags
EOF
