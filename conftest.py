"""Hooks for every test folder of the repository (tests/, envs/echo/tests/, research/learning/tests/): the
`extended` tier that the every-commit run deselects (tests/extended.py)."""

from tests.extended import pytest_addoption, pytest_collection_modifyitems, pytest_configure  # noqa: F401
