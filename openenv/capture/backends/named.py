"""Backends by name: the one place a word from a flag or a config (`local`, `vllm`) becomes a backend.

The CLI (`openenv proxy`, `openenv harness`, `openenv train`), the harness env's shared capture server
and the trainer's policy server all choose this way, so a new backend is one line here and one in
`BackendName`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, get_args

from openenv.capture.backends.base import Backend
from openenv.errors import BadRequest

__all__ = ["BACKEND_NAMES", "BackendName", "make_backend"]

BackendName = Literal["local", "vllm"]
BACKEND_NAMES: tuple[BackendName, ...] = get_args(BackendName)


def make_backend(
    name: str, *, model: str | Path | Any = None, vllm_url: str | Sequence[str] | None = None, **options: Any
) -> Backend:
    """The backend called `name`.

    Args:
        name: `local` (in-process transformers on CPU) or `vllm` (OpenAI-compatible vLLM servers).
        model: for `local`: a model folder, or a loaded model (the trainer's live policy).
        vllm_url: for `vllm`: one base URL, several (a list or `"http://a,http://b"`: `VLLMEngines`).
        options: passed on to the backend's constructor (e.g. `autocast=` for `local`).

    Raises:
        BadRequest: an unknown name, `local` without a model, or `vllm` without a URL.
    """
    if name == "local":
        if model is None:
            raise BadRequest("the local backend needs a model (a folder or a loaded model)")
        from openenv.capture.backends.local import LocalBackend  # torch and transformers: only when asked

        return LocalBackend(model, **options)
    if name == "vllm":
        if not vllm_url:
            raise BadRequest("the vllm backend needs the base URL of a vLLM server (vllm_url)")
        from openenv.capture.backends.vllm_engines import vllm_backend

        return vllm_backend(vllm_url, **options)
    raise BadRequest(f"unknown backend {name!r}; expected one of {', '.join(BACKEND_NAMES)}")
