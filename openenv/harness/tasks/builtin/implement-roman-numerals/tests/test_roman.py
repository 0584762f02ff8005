import unittest

from roman import to_roman


class ToRomanTest(unittest.TestCase):
    def test_examples(self):
        cases = {1: "I", 4: "IV", 9: "IX", 14: "XIV", 40: "XL", 90: "XC", 400: "CD", 1994: "MCMXCIV", 3999: "MMMCMXCIX"}
        for n, expected in cases.items():
            self.assertEqual(to_roman(n), expected)

    def test_out_of_range(self):
        for n in (0, 4000, -3):
            with self.assertRaises(ValueError):
                to_roman(n)
