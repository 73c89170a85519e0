"""Errors that reach users: always say where (line, field) and what is wrong."""

from __future__ import annotations

from pydantic import BaseModel


class InputError(ValueError):
    """Bad input from an upload or a request; nothing has been stored when it is raised."""

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

    def as_dict(self) -> dict:
        return {"detail": str(self), "line": self.line, "field": self.field}


class ErrorOut(BaseModel):
    """Every refusal of the API, a 4xx or a 503, in one JSON shape: what is wrong, and where
    when the input says (`field`: a form field, a query parameter, a body path such as
    `participant_ids.0` or `path.<name>`; `line`: the line of an upload)."""

    detail: str
    field: str | None = None
    line: int | None = None


ERROR_RESPONSES: dict = {
    "4XX": {"model": ErrorOut, "description": "Refused: bad input (422, with where), not logged "
            "in (401), not allowed (403), not among yours (404), too large (413), too many (429)"},
    503: {"model": ErrorOut, "description": "The database or the job queue cannot be reached "
          "right now; retry after `Retry-After` seconds"},
}
