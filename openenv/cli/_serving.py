"""What every `openenv serve` road shares once its app is built: the token file for this user's clients."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

__all__ = ["token_file_while_serving"]


def token_file_while_serving(app: Any, port: int, token: str) -> None:
    """Leave the token in this user's 0600 file while the app runs; remove it in the app's shutdown
    (uvicorn re-raises SIGTERM after shutdown, so code after `uvicorn.run` may never run)."""
    import contextlib

    from openenv.core.auth import remove_token_file, write_token_file

    inner = app.router.lifespan_context

    @contextlib.asynccontextmanager
    async def lifespan(a: Any) -> AsyncIterator[Any]:
        write_token_file(port, token)
        try:
            async with inner(a) as state:
                yield state
        finally:
            remove_token_file(port, token)

    app.router.lifespan_context = lifespan
