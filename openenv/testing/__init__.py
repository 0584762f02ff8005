"""Test infrastructure that ships with the package: the tiny model and a real vLLM CPU server."""
