"""What the STS pages and API share: the refusals as HTTP, a suite's version, the pages' redirects."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, HTTPException, Request
from pydantic import Field, ValidationError
from sqlalchemy.orm import Session

from app.auth.deps import db, require
from app.auth.models import User
from app.errors import InputError
from app.kinds.sts import suites
from app.params import MAX_ID, NOT_BOOL, Id
from app.web import back

# Numbers in bodies are bounded where they enter (the database's INTEGER range); the services
# check what each one may be.
Count = Annotated[int, Field(ge=0, le=MAX_ID), NOT_BOOL]
researcher = require("researcher", "admin")
# Pixels per grid cell on the mining page's timeline (smaller than the annotator's: the whole
# recording is one strip).
TIMELINE_TILE = 12


@contextmanager
def _answers():
    """The services' refusals as HTTP: not yours 404; a published version's change, a
    Conflict, is an InputError the app answers with 409 and its field."""
    try:
        yield
    except suites.NotFound as exc:
        raise HTTPException(404, str(exc)) from None


def _version(session: Session, user: User, suite_id: int, number: int):
    suite = suites.get_suite(session, user, suite_id)
    return suite, suites.get_version(session, suite, number)


@contextmanager
def _flashed(request: Request, holder: dict):
    """A form's refusal as a message on the page it came from (the page stays usable)."""
    try:
        yield
    except (InputError, ValidationError) as exc:
        holder["error"] = str(exc) if isinstance(exc, InputError) else exc.errors()[0]["msg"]


def stored_plays(request: Request, study_id: int, store: Callable[[], dict], stored_as: str, then: str) -> Any:
    """A play study page's button that stores its plays (as recordings, as people's
    continuations): how many were stored, which were skipped and why, and what to do next; or
    why nothing was stored."""
    out: dict = {}
    with _answers(), _flashed(request, out):
        result = store()
        skipped = [
            f"{result[k]} {what}"
            for k, what in (("existing", "stored before"), ("empty", "empty"), ("failed", "unsuccessful"))
            if result.get(k)
        ]
        return back(
            request,
            f"/studies/{study_id}",
            f"Stored {result['created']} plays as {stored_as}"
            + (f" (skipped: {', '.join(skipped)})" if skipped else "")
            + f": {then}.",
        )
    return back(request, f"/studies/{study_id}", f"Nothing stored: {out['error']}", "error")


@dataclass(frozen=True)
class Place:
    """What a suite's page routes load first: the request's session, the caller's account, and
    the version (of a suite of theirs) or the scenario the path names; another's is 404."""

    session: Session
    user: User
    suite: Any
    version: Any
    scenario: Any = None


def at_version(suite_id: Id, number: Id, session: Session = Depends(db), user: User = Depends(researcher)) -> Place:
    with _answers():
        suite, version = _version(session, user, suite_id, number)
    return Place(session, user, suite, version)


def at_scenario(scenario_id: Id, session: Session = Depends(db), user: User = Depends(researcher)) -> Place:
    with _answers():
        sc, suite, version = suites.get_scenario(session, user, scenario_id)
    return Place(session, user, suite, version, sc)


def _list(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]
