"""Numbers a request carries, bounded where they enter: a route's id is `Id`, never a bare
`int`, so an id past the database's range is refused as input (422) rather than reaching the
database, which fails on it (PostgreSQL: "integer out of range"; SQLite: OverflowError past
64 bits), i.e. a 500."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import File, Form, Path
from pydantic import BeforeValidator, Field
from pydantic_core import PydanticCustomError

from app.errors import InputError

MAX_ID = 2**31 - 1  # ids are INTEGER columns (PostgreSQL's int4), and positive

Id = Annotated[int, Path(ge=1, le=MAX_ID)]

# A page's form field, as text ("" where the form leaves it out): the route reads the number or
# choice in it and names the field in its own message (app.web.form_number).
FormText = Annotated[str, Form()]


# The same bounds for an id inside a JSON body.
def _not_bool(value: object) -> object:
    """JSON's true and false are not numbers (pydantic would read them as 1 and 0); 3.0 is."""
    if isinstance(value, bool):
        raise ValueError("a number, not true or false")
    return value


NOT_BOOL = BeforeValidator(_not_bool)


def json_number(value: object, *, whole: bool) -> int | float | None:
    """A number as JSON Schema has it, None for anything else: 3.0 is the `integer` 3, true
    and false are no numbers, nor is NaN; with `whole`, 3.5 is none either."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        return None
    if whole and isinstance(value, float):
        return int(value) if value.is_integer() else None
    return value


def _whole(value: object) -> object:
    """A whole number as JSON Schema's `integer` has it: 3 or 3.0, never true, "3" or 3.5
    (pydantic's strict mode refuses 3.0, its lax mode takes "3" and true). What is no whole
    number otherwise goes on to pydantic, which refuses it in its own words."""
    if isinstance(value, (bool, str)):
        raise PydanticCustomError("int_type", "Input should be a valid integer")
    number = json_number(value, whole=True)
    return value if number is None else number


def whole_number(value: object, field: str, low: int, high: int) -> int:
    """A service's whole-number argument from low to high (a Python int, never True or False),
    or InputError naming `field`."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InputError(f"{field} must be a whole number from {low} to {high}", field=field)
    return value


WHOLE = BeforeValidator(_whole)
Whole = Annotated[int, WHOLE]
BodyId = Annotated[int, Field(ge=1, le=MAX_ID), NOT_BOOL]

# A name the code strips and refuses when nothing is left: at least one character Python's
# str.strip() keeps (JSON Schema's `pattern` and pydantic's both search, unanchored). Not `\S`:
# ECMA-262's white space (the schema's) and Python's differ (U+001C-U+001F and U+0085 are
# Python's only, U+FEFF ECMA's), so the class lists Python's, as both dialects read it.
NOT_BLANK = r"[^\t\n\x0b\x0c\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]"


@dataclass(frozen=True)
class OneOf:
    """A string the code takes only from a set known when the app starts (the installed kinds,
    a simulator's levels): `Annotated[str, OneOf(lambda: names)]` lists them as the schema's
    `enum`, so the documentation says what the route accepts; the route still checks."""

    values: Callable[[], Iterable[str]]

    def __get_pydantic_json_schema__(self, core_schema: Any, handler: Any) -> Any:
        schema = handler(core_schema)
        schema["enum"] = sorted(self.values())
        return schema


# An upload the route reads: required, and not empty (read_upload refuses an empty file).
UPLOAD = File(..., json_schema_extra={"minLength": 1})


def exactly_one_of(*variants: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """A body's schema for alternative field sets (`json_schema_extra`): each variant
    {field: its schema} requires its fields and its first field is null in the others, so the
    documentation says a body gives exactly one of them, as the route checks."""
    keys = [next(iter(v)) for v in variants]
    return {
        "oneOf": [
            {"required": list(v), "properties": {**v, **{k: {"type": "null"} for k in keys if k not in v}}}
            for v in variants
        ]
    }
