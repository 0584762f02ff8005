#!/bin/sh
# Reference solution: rewrite the fixed file(s) in the workspace.
set -e
cat > csvline.py <<'EOF'
"""Parse one line of a CSV export."""

import csv


def parse_line(line):
    """Return the fields of one CSV line."""
    return next(csv.reader([line.rstrip("\n")]))
EOF
