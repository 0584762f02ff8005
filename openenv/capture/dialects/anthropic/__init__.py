"""Anthropic Messages (Claude Code): `protocol.py` holds the wire models, `convert.py` the mapping."""

from openenv.capture.dialects.anthropic.convert import AnthropicDialect

__all__ = ["AnthropicDialect"]
