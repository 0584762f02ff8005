#!/bin/sh
# Reference solution: rewrite the fixed file(s) in the workspace.
set -e
cat > intervals.py <<'EOF'
"""Calendar interval arithmetic."""


def merge_intervals(intervals):
    """Merge overlapping or touching (start, end) intervals; return them sorted as tuples."""
    merged = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged
EOF
