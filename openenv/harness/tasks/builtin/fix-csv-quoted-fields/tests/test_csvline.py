import unittest

from csvline import parse_line


class ParseLineTest(unittest.TestCase):
    def test_plain(self):
        self.assertEqual(parse_line("a,b,c\n"), ["a", "b", "c"])

    def test_quoted_comma(self):
        self.assertEqual(parse_line('1,"Smith, Jo",x'), ["1", "Smith, Jo", "x"])

    def test_doubled_quote(self):
        self.assertEqual(parse_line('"say ""hi""",2'), ['say "hi"', "2"])
