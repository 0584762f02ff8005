import unittest

from pager import paginate


class PaginateTest(unittest.TestCase):
    def test_first_page(self):
        self.assertEqual(paginate(list(range(25)), 1, 10), list(range(10)))

    def test_last_partial_page(self):
        self.assertEqual(paginate(list(range(25)), 3, 10), [20, 21, 22, 23, 24])

    def test_page_past_the_end_is_empty(self):
        self.assertEqual(paginate([1, 2, 3], 5, 2), [])
