import unittest

from units import celsius_to_fahrenheit, fahrenheit_to_celsius


class UnitsTest(unittest.TestCase):
    def test_boiling_point(self):
        self.assertAlmostEqual(celsius_to_fahrenheit(100), 212)
        self.assertAlmostEqual(fahrenheit_to_celsius(212), 100)

    def test_minus_forty_is_the_same(self):
        self.assertAlmostEqual(celsius_to_fahrenheit(-40), -40)
        self.assertAlmostEqual(fahrenheit_to_celsius(-40), -40)

    def test_round_trip(self):
        self.assertAlmostEqual(fahrenheit_to_celsius(celsius_to_fahrenheit(37.5)), 37.5)
