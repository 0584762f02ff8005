"""Turning a pydantic `ValidationError` into the one-line message every layer shows its caller.

The env server, the env client, the capture proxy's dialects, the harness env's reset options, the
manifest loader and the CLI all report bad input the same way: each offending field by its dotted path,
with pydantic's reason, e.g. `action field 'mesage': Extra inputs are not permitted`.
FastAPI's `RequestValidationError` has the same `errors()` and is accepted too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

__all__ = ["HasErrors", "field_errors", "field_path", "json_error", "validation_message"]

_MAX_LISTED = 5


class HasErrors(Protocol):
    """A pydantic `ValidationError` or FastAPI's `RequestValidationError`."""

    def errors(self) -> Sequence[Any]: ...


def field_path(loc: Sequence[int | str]) -> str:
    """`('messages', 0, 'role')` -> `messages.0.role`; the empty path (the whole value) is `(root)`."""
    return ".".join(str(p) for p in loc) or "(root)"


def field_errors(err: HasErrors) -> list[dict[str, Any]]:
    """The errors as JSON-safe dicts `{loc, msg, type}` (pydantic's own carry the input and context,
    which JSON may not be able to hold), for an error's `details`."""
    return [{"loc": [str(p) for p in e["loc"]], "msg": e["msg"], "type": e["type"]} for e in err.errors()]


def json_error(err: HasErrors) -> str | None:
    """The parser's reason when the input was not JSON at all (None when it was JSON but invalid)."""
    errors = err.errors()
    if errors and errors[0]["type"] == "json_invalid":
        return str(errors[0]["msg"])
    return None


def validation_message(err: HasErrors, what: str) -> str:
    """One line naming each offending field (the first five, then how many more), e.g.
    `action field 'mesage': Extra inputs are not permitted; action field 'message': Field required`.

    Args:
        err: the validation error.
        what: what was validated, as the caller calls it ("action", "request", "reset option").
    """
    errors = err.errors()
    parts = [f"{what} field '{field_path(e['loc'])}': {e['msg']}" for e in errors[:_MAX_LISTED]]
    more = len(errors) - len(parts)
    return "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")
