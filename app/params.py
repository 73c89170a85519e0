"""Numbers a request carries, bounded where they enter: a route's id is `Id`, never a bare
`int`, so an id past the database's range is refused as input (422) rather than reaching the
database, which fails on it (PostgreSQL: "integer out of range"; SQLite: OverflowError past
64 bits), i.e. a 500."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import File, Path
from pydantic import BeforeValidator, Field

MAX_ID = 2**31 - 1  # ids are INTEGER columns (PostgreSQL's int4), and positive

Id = Annotated[int, Path(ge=1, le=MAX_ID)]


# The same bounds for an id inside a JSON body.
def _not_bool(value: object) -> object:
    """JSON's true and false are not numbers (pydantic would read them as 1 and 0); 3.0 is."""
    if isinstance(value, bool):
        raise ValueError("a number, not true or false")
    return value


NOT_BOOL = BeforeValidator(_not_bool)
BodyId = Annotated[int, Field(ge=1, le=MAX_ID), NOT_BOOL]

# A name the code strips and refuses when nothing is left: at least one non-space character
# (JSON Schema's `pattern` and pydantic's both search, unanchored).
NOT_BLANK = r"\S"


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
