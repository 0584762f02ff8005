#!/bin/sh
# Reference solution: rewrite the fixed file(s) in the workspace.
set -e
cat > pager.py <<'EOF'
"""Split a list into pages for display."""


def paginate(items, page, per_page=10):
    """Return the items on `page` (1-based), at most `per_page` of them."""
    start = (page - 1) * per_page
    return items[start:start + per_page]
EOF
