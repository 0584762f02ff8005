import unittest

from wordfreq import top_words


class TopWordsTest(unittest.TestCase):
    def test_counts_case_insensitively(self):
        self.assertEqual(top_words("The cat. the CAT! a dog", 2), [("cat", 2), ("the", 2)])

    def test_apostrophes_are_part_of_words(self):
        self.assertEqual(top_words("don't stop, don't", 1), [("don't", 2)])

    def test_n_larger_than_vocabulary(self):
        self.assertEqual(top_words("b a", 5), [("a", 1), ("b", 1)])
