"""OpenAI Responses (Codex): `protocol.py` holds the wire models, `convert.py` the mapping."""

from openenv.capture.dialects.openai_responses.convert import OpenAIResponsesDialect

__all__ = ["OpenAIResponsesDialect"]
