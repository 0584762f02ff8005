"""Backends: what turns prompt ids into completion ids and logprobs (vLLM, local transformers)."""

from __future__ import annotations

from openenv.capture.backends.base import Backend, Generation, TokenIds
from openenv.capture.backends.local import LocalBackend
from openenv.capture.backends.vllm import VLLMBackend

__all__ = ["Backend", "Generation", "LocalBackend", "TokenIds", "VLLMBackend"]
