"""A LIFO stack."""


class Stack:
    def __init__(self):
        self._items = []

    def push(self, item):
        self._items.append(item)

    def pop(self):
        if self._items:
            return self._items.pop()
        return None

    def peek(self):
        return self._items[-1] if self._items else None
