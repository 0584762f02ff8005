"""`core.http_errors.parse_body`: a body validated by hand fails exactly as one FastAPI validated."""

from __future__ import annotations

import pytest
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ValidationError

from openenv.core.http_errors import parse_body, validation_error
from openenv.errors import BadRequest, MalformedMessage


class Step(BaseModel):
    action: str
    count: int = 1


def test_a_valid_body_is_the_model() -> None:
    assert parse_body(Step, b'{"action": "go", "count": 2}') == Step(action="go", count=2)


def test_a_body_that_is_not_json_is_a_malformed_message() -> None:
    with pytest.raises(MalformedMessage, match="not valid JSON"):
        parse_body(Step, b"{nope")


def test_a_field_that_does_not_validate_is_named_with_its_errors() -> None:
    with pytest.raises(BadRequest) as caught:
        parse_body(Step, b'{"count": "many"}')
    assert "request field 'action': Field required" in caught.value.message
    assert {tuple(e["loc"]) for e in caught.value.details["errors"]} == {("action",), ("count",)}


def test_the_same_error_as_fastapis_own_validation() -> None:
    try:
        Step.model_validate_json(b'{"count": "many"}')
    except ValidationError as exc:
        by_hand = validation_error(exc)
        by_fastapi = validation_error(RequestValidationError(exc.errors()))
    assert type(by_hand) is type(by_fastapi)
    assert (by_hand.message, by_hand.details) == (by_fastapi.message, by_fastapi.details)
