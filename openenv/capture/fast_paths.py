"""One switch for the hand-written fast paths on the token-exact path: `OPENENV_FAST_PATHS=0` turns them off.

Three pieces of the proxy replace a maintained library with code of our own for speed, each checked
against the library by an equivalence suite: `dialects/_body.py` (request bodies validated item by item,
reading pydantic's private `__pydantic_decorators__`), `word_encoder.py` and the renderer's offset-free
encode (the tokenizer's ids without its pre-tokenizer), and `backends/engine_http.py` (an HTTP client on
httptools). With the switch off they give way to plain pydantic validation, `tokenizer.encode` and
httpx, so a mismatch seen in production can be triaged in one command: run again with
`OPENENV_FAST_PATHS=0` and compare. CI runs the equivalence suites both ways (`scripts/test.sh`).
"""

from __future__ import annotations

from openenv.settings import flag

__all__ = ["ENV", "fast_paths"]

ENV = "OPENENV_FAST_PATHS"


def fast_paths() -> bool:
    """Whether the fast paths are on (the default); read when a parser, renderer or client is made."""
    return flag(ENV)
