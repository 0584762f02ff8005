import unittest

from text_utils import slugify


class SlugifyTest(unittest.TestCase):
    def test_punctuation_and_case(self):
        self.assertEqual(slugify("Hello, World!"), "hello-world")

    def test_runs_of_separators_collapse(self):
        self.assertEqual(slugify("  a -- b__c  "), "a-b-c")

    def test_digits_are_kept(self):
        self.assertEqual(slugify("Top 10 Tips"), "top-10-tips")

    def test_empty(self):
        self.assertEqual(slugify("!!!"), "")
