import unittest

from nested import flatten


class FlattenTest(unittest.TestCase):
    def test_numbers(self):
        self.assertEqual(list(flatten([1, [2, (3, [4])], 5])), [1, 2, 3, 4, 5])

    def test_strings_are_atoms(self):
        self.assertEqual(list(flatten(["ab", ["cd", [b"ef"]]])), ["ab", "cd", b"ef"])

    def test_empty(self):
        self.assertEqual(list(flatten([[], ()])), [])
