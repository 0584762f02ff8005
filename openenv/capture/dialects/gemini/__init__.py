"""Gemini generateContent (Gemini CLI): `protocol.py` holds the wire models, `convert.py` the mapping."""

from openenv.capture.dialects.gemini.convert import GeminiDialect

__all__ = ["GeminiDialect"]
