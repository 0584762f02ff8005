import unittest

from config import deep_merge


class DeepMergeTest(unittest.TestCase):
    def test_nested_dicts_merge(self):
        merged = deep_merge({"db": {"host": "a", "port": 1}}, {"db": {"port": 2}})
        self.assertEqual(merged, {"db": {"host": "a", "port": 2}})

    def test_inputs_are_not_mutated(self):
        base = {"a": {"b": 1}}
        deep_merge(base, {"a": {"c": 2}, "d": 3})
        self.assertEqual(base, {"a": {"b": 1}})

    def test_non_dict_overrides_dict(self):
        self.assertEqual(deep_merge({"a": {"b": 1}}, {"a": 5}), {"a": 5})
