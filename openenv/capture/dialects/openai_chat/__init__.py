"""OpenAI Chat Completions: `protocol.py` holds the wire models, `convert.py` the mapping."""

from openenv.capture.dialects.openai_chat.convert import OpenAIChatDialect

__all__ = ["OpenAIChatDialect"]
