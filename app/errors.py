"""Errors that reach users: always say where (line, field) and what is wrong."""

from __future__ import annotations


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
