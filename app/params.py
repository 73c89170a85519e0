"""Numbers a request carries, bounded where they enter: a route's id is `Id`, never a bare
`int`, so an id past the database's range is refused as input (422) rather than reaching the
database, which fails on it (PostgreSQL: "integer out of range"; SQLite: OverflowError past
64 bits), i.e. a 500."""

from __future__ import annotations

from typing import Annotated

from fastapi import Path
from pydantic import Field

MAX_ID = 2**31 - 1  # ids are INTEGER columns (PostgreSQL's int4), and positive

Id = Annotated[int, Path(ge=1, le=MAX_ID)]
# The same bounds for an id inside a JSON body.
BodyId = Annotated[int, Field(ge=1, le=MAX_ID)]
