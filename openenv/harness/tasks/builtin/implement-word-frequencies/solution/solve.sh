#!/bin/sh
# Reference solution: rewrite the fixed file(s) in the workspace.
set -e
cat > wordfreq.py <<'EOF'
"""Word frequencies for a text report."""

import re
from collections import Counter


def top_words(text, n):
    """Return the n most common words as (word, count), most common first, ties alphabetical."""
    counts = Counter(re.findall(r"[a-z']+", text.lower()))
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:n]
EOF
