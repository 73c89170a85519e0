"""Per-route dependencies: the database session, the current user and role checks."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, cast

from fastapi import Depends, HTTPException, Request
from sqlalchemy.orm import Session

from app.auth.models import User
from app.auth.security import csrf_ok, user_for_token
from app.db import get_sessionmaker
from app.params import Id

if TYPE_CHECKING:
    from app.studies.models import Study


def db(request: Request) -> Iterator[Session]:
    session = get_sessionmaker(request.app.state.database_url)()
    try:
        yield session
    finally:
        session.close()


def caller(session: Session, authorization: str, session_data: dict[str, Any]) -> User | None:
    """The account a request speaks for, from its headers alone: its bearer token, else its
    session cookie's account (None for a session from before the account logged out). 401 for
    a token that is wrong, revoked or expired."""
    if authorization.lower().startswith("bearer "):
        user = user_for_token(session, authorization[7:].strip())
        if user is None:
            raise HTTPException(401, "invalid or revoked API token")
        return user
    uid = session_data.get("uid")
    user = session.get(User, uid) if isinstance(uid, int) else None
    if user is not None and session_data.get("sv", 0) != user.session_version:
        return None
    return user


def optional_user(request: Request, session: Session = Depends(db)) -> User | None:
    user = caller(session, request.headers.get("authorization", ""), request.session)
    if request.headers.get("authorization", "").lower().startswith("bearer "):
        request.state.via_token = True
    elif user is None and "uid" in request.session:
        request.session.clear()  # a session from before the account logged out
    return user


def refusal(path: str, user: User | None, roles: tuple[str, ...]) -> HTTPException | None:
    """Why this caller may not use a route open to `roles`, or None: the API answers 401, a
    page sends to the login form; a wrong role is 403."""
    if user is None or user.role == "worker":
        if path.startswith("/api/"):
            return HTTPException(401, "log in or send an API token")
        return HTTPException(303, headers={"Location": f"/login?next={path}"})
    if user.role not in roles and not (user.role == "admin" and "researcher" in roles):
        return HTTPException(403, f"this needs the {' or '.join(roles)} role")
    return None


class RoleCheck(Protocol):
    """The dependency `require` makes: the caller's account, and the roles it lets in."""

    roles: tuple[str, ...]

    def __call__(self, request: Request, user: User | None = ...) -> User: ...


def require(*roles: str) -> RoleCheck:
    """Allow these roles (admins may do everything a researcher may)."""

    def dep(request: Request, user: User | None = Depends(optional_user)) -> User:
        if (refused := refusal(request.url.path, user, roles)) is not None:
            raise refused
        assert user is not None  # refusal() refuses a caller without an account
        return user

    check = cast(RoleCheck, dep)  # the function itself, given its `roles` here
    check.roles = roles  # app.middleware.AuthBeforeBody finds the routes that need an account by it
    return check


CSRF_REFUSED = "missing or stale form token: reload the page and try again"


def csrf_from_headers(method: str, headers: Mapping[str, str], session_data: dict[str, Any]) -> bool | None:
    """Whether a request passes the CSRF check by its headers alone: True (nothing to check,
    or a good X-CSRF-Token), False (refused), None (its token is a form field: only reading
    the body tells)."""
    if method in ("GET", "HEAD", "OPTIONS"):
        return True
    if headers.get("authorization", "").lower().startswith("bearer "):
        return True
    content_type = headers.get("content-type", "")
    # A cross-site page cannot send a JSON body without a CORS preflight, which we never allow.
    if content_type.startswith("application/json"):
        return True
    presented = headers.get("x-csrf-token")
    if presented is None and content_type.startswith(("application/x-www-form-urlencoded", "multipart/form-data")):
        # No form token can match a session that was never given one.
        return None if session_data.get("csrf") else False
    return csrf_ok(session_data, presented)


async def verify_csrf(request: Request) -> None:
    """Cookie-authenticated writes need the session's CSRF token (form field or header)."""
    ok = csrf_from_headers(request.method, request.headers, request.session)
    if ok is None:
        # Whatever the form holds under the name: csrf_ok takes only the string it gave.
        ok = csrf_ok(request.session, (await request.form()).get("csrf_token"))
    if not ok:
        raise HTTPException(403, CSRF_REFUSED)


def managed_study(session: Session, study_id: int, user: User, detail: str = "no such study among yours") -> Study:
    """The study if the user may manage it (its owner, or an admin); 404 otherwise, so another
    researcher's studies are not revealed to exist. For every router, the kinds' included."""
    from app.studies.models import Study
    from app.studies.services import can_manage

    study = session.get(Study, study_id)
    if study is None or not can_manage(user, study):
        raise HTTPException(404, detail)
    return study


@dataclass(frozen=True)
class Managed:
    """What a study's routes load first: the request's session, the caller's account and the
    study at the path's {study_id}, which the caller may manage."""

    session: Session
    user: User
    study: Study


def managing(check: RoleCheck, detail: str = "no such study among yours") -> Callable[..., Managed]:
    """The dependency a study's routes take: the role check (401 or 403), then the study, 404
    where the caller may not manage it (managed_study, with this detail)."""

    def dep(study_id: Id, session: Session = Depends(db), user: User = Depends(check)) -> Managed:
        return Managed(session, user, managed_study(session, study_id, user, detail))

    return dep
