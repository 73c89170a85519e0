"""Errors that reach users: always say where (line, field) and what is wrong."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel


class InputError(ValueError):
    """Bad input from an upload or a request; nothing has been stored when it is raised."""

    status_code = 422  # the API's answer (the pages answer every refusal of input with 422)

    def __init__(self, message: str, *, line: int | None = None, field: str | None = None):
        self.message = message
        self.line = line
        self.field = field
        super().__init__(str(self))

    def __str__(self) -> str:
        where = []
        if self.line is not None:
            where.append(f"line {self.line}")
        if self.field is not None:
            where.append(f"field '{self.field}'")
        return f"{', '.join(where)}: {self.message}" if where else self.message

    def as_dict(self) -> dict[str, Any]:
        return {"detail": str(self), "line": self.line, "field": self.field}


class Conflict(InputError):
    """A well-formed request that the state of what it names refuses (a study of another kind
    or past its draft, a name already taken): the API answers 409, as its schema says."""

    status_code = 409


class TooLarge(InputError):
    """A body past what the route takes, refused as it arrives: the API answers 413."""

    status_code = 413


class Missing(InputError):
    """A well-formed request naming, in its body, a row that is not there (or not among the
    caller's): the API answers 404, as it does for a path's id."""

    status_code = 404


class ErrorOut(BaseModel):
    """Every refusal of the API, a 4xx or a 503, in one JSON shape: what is wrong, and where
    when the input says (`field`: a form field, a query parameter, a body path such as
    `participant_ids.0` or `path.<name>`; `line`: the line of an upload)."""

    detail: str
    field: str | None = None
    line: int | None = None


ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    "4XX": {
        "model": ErrorOut,
        "description": "Refused: bad input (422, with where), not logged "
        "in (401), not allowed (403), not among yours (404), too large (413), too many (429)",
    },
    503: {
        "model": ErrorOut,
        "description": "The database or the job queue cannot be reached right now; retry after `Retry-After` seconds",
    },
}
