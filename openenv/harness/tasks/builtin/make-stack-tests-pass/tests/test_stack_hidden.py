import unittest

from stack import Stack


class StackHiddenTest(unittest.TestCase):
    def test_lifo_order(self):
        s = Stack()
        for i in range(3):
            s.push(i)
        self.assertEqual([s.pop(), s.pop(), s.pop()], [2, 1, 0])

    def test_peek_empty_raises(self):
        with self.assertRaises(IndexError):
            Stack().peek()

    def test_pop_empty_raises(self):
        with self.assertRaises(IndexError):
            Stack().pop()

    def test_len_tracks_pushes_and_pops(self):
        s = Stack()
        s.push("a")
        s.push("b")
        s.pop()
        self.assertEqual(len(s), 1)
