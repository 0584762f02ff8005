import unittest

from tags import add_tag


class AddTagTest(unittest.TestCase):
    def test_calls_do_not_share_state(self):
        self.assertEqual(add_tag("a"), ["a"])
        self.assertEqual(add_tag("b"), ["b"])

    def test_existing_list_is_extended(self):
        tags = ["x"]
        self.assertIs(add_tag("y", tags), tags)
        self.assertEqual(tags, ["x", "y"])

    def test_duplicates_are_ignored(self):
        self.assertEqual(add_tag("x", ["x"]), ["x"])
