"""Per-route dependencies: the database session, the current user and role checks."""

from __future__ import annotations

from collections.abc import Iterator

from fastapi import Depends, HTTPException, Request
from sqlalchemy.orm import Session

from app.auth.models import User
from app.auth.security import csrf_ok, user_for_token
from app.db import get_sessionmaker


def db(request: Request) -> Iterator[Session]:
    session = get_sessionmaker(request.app.state.database_url)()
    try:
        yield session
    finally:
        session.close()


def optional_user(request: Request, session: Session = Depends(db)) -> User | None:
    auth = request.headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        user = user_for_token(session, auth[7:].strip())
        if user is None:
            raise HTTPException(401, "invalid or revoked API token")
        request.state.via_token = True
        return user
    uid = request.session.get("uid")
    user = session.get(User, uid) if uid else None
    if user is not None and request.session.get("sv", 0) != user.session_version:
        request.session.clear()  # a session from before the account logged out
        return None
    return user


def require(*roles: str):
    """Allow these roles (admins may do everything a researcher may)."""

    def dep(request: Request, user: User | None = Depends(optional_user)) -> User:
        if user is None or user.role == "worker":
            if request.url.path.startswith("/api/"):
                raise HTTPException(401, "log in or send an API token")
            raise HTTPException(303, headers={"Location": f"/login?next={request.url.path}"})
        if user.role not in roles and not (user.role == "admin" and "researcher" in roles):
            raise HTTPException(403, f"this needs the {' or '.join(roles)} role")
        return user

    return dep


async def verify_csrf(request: Request) -> None:
    """Cookie-authenticated writes need the session's CSRF token (form field or header)."""
    if request.method in ("GET", "HEAD", "OPTIONS"):
        return
    if request.headers.get("authorization", "").lower().startswith("bearer "):
        return
    # A cross-site page cannot send a JSON body without a CORS preflight, which we never allow.
    if request.headers.get("content-type", "").startswith("application/json"):
        return
    presented = request.headers.get("x-csrf-token")
    if presented is None and request.headers.get("content-type", "").startswith(
            ("application/x-www-form-urlencoded", "multipart/form-data")):
        presented = (await request.form()).get("csrf_token")
    if not csrf_ok(request.session, presented):
        raise HTTPException(403, "missing or stale form token: reload the page and try again")


def managed_study(session: Session, study_id: int, user: User, detail: str = "no such study among yours"):
    """The study if the user may manage it (its owner, or an admin); 404 otherwise, so another
    researcher's studies are not revealed to exist. For every router, the kinds' included."""
    from app.studies.models import Study
    from app.studies.services import can_manage

    study = session.get(Study, study_id)
    if study is None or not can_manage(user, study):
        raise HTTPException(404, detail)
    return study
