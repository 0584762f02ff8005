import unittest

from stack import Stack


class StackTest(unittest.TestCase):
    def test_pop_empty_raises(self):
        with self.assertRaises(IndexError):
            Stack().pop()

    def test_len(self):
        s = Stack()
        s.push(1)
        s.push(2)
        self.assertEqual(len(s), 2)
