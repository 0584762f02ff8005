import unittest

from search import find_index


class FindIndexTest(unittest.TestCase):
    def test_every_element_is_found(self):
        items = [1, 3, 5, 7, 9, 11]
        for i, value in enumerate(items):
            self.assertEqual(find_index(items, value), i)

    def test_absent_values(self):
        for value in (0, 4, 12):
            self.assertEqual(find_index([1, 3, 5, 7, 9, 11], value), -1)

    def test_empty_and_single(self):
        self.assertEqual(find_index([], 1), -1)
        self.assertEqual(find_index([2], 2), 0)
