#!/bin/sh
# Reference solution: rewrite the fixed file(s) in the workspace.
set -e
cat > stack.py <<'EOF'
"""A LIFO stack."""


class Stack:
    def __init__(self):
        self._items = []

    def __len__(self):
        return len(self._items)

    def push(self, item):
        self._items.append(item)

    def pop(self):
        if not self._items:
            raise IndexError("pop from an empty stack")
        return self._items.pop()

    def peek(self):
        if not self._items:
            raise IndexError("peek at an empty stack")
        return self._items[-1]
EOF
