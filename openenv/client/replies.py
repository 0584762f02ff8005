"""Reading a server's reply frames into the client's typed models, whichever protocol shape they come in.

An observation arrives in one of two shapes:
  - nested, as the reference OpenEnv sends it (`serialize_observation`), and as our server does once it
    speaks the reference's wire: `{"observation": {env fields, metadata}, "reward": r, "done": d,
    "metadata"?: m}`;
  - flat, as servers of this package sent it before: `{env fields, "reward": r, "done": d, "metadata": m}`.
Both become one flat dict that the env's `Observation` model validates. A state is flat in both.
Anything that does not decode raises `UnexpectedReply` naming the field, never a pydantic error.
"""

from __future__ import annotations

from collections.abc import Container
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from openenv.core.validation import validation_message
from openenv.errors import UnexpectedReply

__all__ = ["ReplyFrame", "decode_model", "observation_fields", "parse_frame"]

M = TypeVar("M", bound=BaseModel)

_ENVELOPE_SIGNS = frozenset({"reward", "done"})


class ReplyFrame(BaseModel):
    """A server's WebSocket reply, `{"type", "data"}`, in either protocol. The type is checked by the
    caller against the one its request expects, so a server that grows new frame types stays readable."""

    model_config = ConfigDict(extra="ignore")

    type: str
    data: dict[str, Any] = Field(default_factory=dict)


def parse_frame(raw: str | bytes, *, during: str) -> ReplyFrame:
    """The `{"type", "data"}` frame in `raw`, or `UnexpectedReply` saying what came instead."""
    try:
        return ReplyFrame.model_validate_json(raw)
    except ValidationError as exc:
        shown = raw[:300] if isinstance(raw, str) else raw[:300].decode(errors="replace")
        raise UnexpectedReply(
            f"the server answered {during} with something that is not a reply frame "
            f"({validation_message(exc, 'frame')}): {shown!r}"
        ) from None


def observation_fields(data: dict[str, Any], declared: Container[str]) -> dict[str, Any]:
    """The observation's fields, flat: a nested envelope is opened, `reward`/`done` put back inside.

    The envelope is recognised by a dict under `observation` with `reward` or `done` beside it, unless the
    observation model itself declares a field named `observation` (`declared`: its field names, or its
    JSON Schema's properties): then the flat reading is the one that fits the model. Keys beside the
    observation other than `reward`, `done` and `metadata` are a server's own additions, which no
    observation model declares; they are left out.
    """
    nested = data.get("observation")
    if not isinstance(nested, dict) or "observation" in declared or not _ENVELOPE_SIGNS & set(data):
        return data
    fields = dict(nested)
    for key in ("reward", "done"):  # beside the observation, where the reference puts them
        if key in data:
            fields[key] = data[key]
    if "metadata" not in fields and isinstance(data.get("metadata"), dict):
        fields["metadata"] = data["metadata"]
    return fields


def decode_model(model: type[M], fields: dict[str, Any], *, what: str) -> M:
    """`model` validated from `fields`; a mismatch (a client typed for another env) is `UnexpectedReply`."""
    try:
        return model.model_validate(fields)
    except ValidationError as exc:
        raise UnexpectedReply(
            f"the server's {what} does not fit {model.__name__}: {validation_message(exc, what)}",
            model=model.__name__,
        ) from None
