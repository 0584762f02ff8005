"""Helpers for openenv's own test suite (pytest hooks, the teacher model, result builders, a loopback Ray
cluster). Nothing under `openenv/` outside this folder imports it (tests/test_imports.py)."""
