#!/bin/sh
# Reference solution: rewrite the fixed file(s) in the workspace.
set -e
cat > lru.py <<'EOF'
"""A tiny least-recently-used cache."""

from collections import OrderedDict


class LRUCache:
    def __init__(self, capacity):
        self.capacity = capacity
        self._data = OrderedDict()

    def get(self, key):
        if key not in self._data:
            return None
        self._data.move_to_end(key)
        return self._data[key]

    def put(self, key, value):
        self._data[key] = value
        self._data.move_to_end(key)
        while len(self._data) > self.capacity:
            self._data.popitem(last=False)
EOF
