"""Login for researchers and admins; the crowd entry link for workers."""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, NamedTuple

from fastapi import APIRouter, Depends, Form, HTTPException, Request
from fastapi.responses import RedirectResponse, Response
from pydantic import BaseModel
from sqlalchemy import select
from sqlalchemy.orm import Session

from app import crowd
from app.auth.deps import db, optional_user, require, verify_csrf
from app.auth.models import ApiToken, User
from app.auth.security import create_token, verify_password
from app.config import get_settings
from app.db import get_sessionmaker
from app.errors import InputError
from app.jsonsafe import unshowable_name
from app.params import Id
from app.studies import assignment
from app.studies.models import Bundle, Study
from app.web import client_address, form_number, rate_limit, render
from app.studies.consent import consent_details

if TYPE_CHECKING:
    from app.studies.hotpath import Entered, StudyConf

router = APIRouter(include_in_schema=False, dependencies=[Depends(verify_csrf)])


@router.get("/")
def home(request: Request, user: User | None = Depends(optional_user)) -> Response:
    if user is not None and user.role in ("researcher", "admin"):
        return RedirectResponse("/studies", status_code=303)
    return render(request, "home.html", user=user)


@router.get("/login")
def login_page(request: Request, next: str = "/studies") -> Response:
    return render(request, "login.html", next=next)


@router.post("/login")
def login(
    request: Request,
    email: str = Form(...),
    password: str = Form(...),
    next: str = Form("/studies"),
    session: Session = Depends(db),
) -> Response:
    rate_limit(request, "login", 20)  # per address
    # Per account too: guessing one researcher's password from many addresses is as slow.
    rate_limit(request, "login-account", 10, key=email.strip().lower()[:255])
    user = session.scalar(select(User).where(User.email == email.strip().lower()))
    if user is None or user.role == "worker" or not verify_password(user.password_hash, password):
        return render(
            request, "login.html", status_code=401, next=next, error="That email and password do not match an account."
        )
    request.session.clear()
    request.session["uid"] = user.id
    request.session["sv"] = user.session_version
    return RedirectResponse(next if next.startswith("/") and not next.startswith("//") else "/studies", status_code=303)


@router.post("/logout")
def logout(request: Request, session: Session = Depends(db)) -> Response:
    """Ends every browser session of the account, a copied cookie's too."""
    uid = request.session.get("uid")
    user = session.get(User, uid) if uid else None
    if user is not None and request.session.get("sv", 0) == user.session_version:
        user.session_version += 1
        session.commit()
    request.session.clear()
    return RedirectResponse("/", status_code=303)


def _tokens(session: Session, user: User) -> list[ApiToken]:
    return list(session.scalars(select(ApiToken).where(ApiToken.user_id == user.id).order_by(ApiToken.id)))


@router.get("/account")
def account(
    request: Request, session: Session = Depends(db), user: User = Depends(require("researcher", "admin"))
) -> Response:
    return render(request, "research/account.html", user=user, tokens=_tokens(session, user))


class TokenForm(BaseModel):
    """The account page's new API token, as typed: its name and days to expiry (blank: never)."""

    name: str = ""
    expires_in_days: str = ""


@router.post("/account/tokens")
def new_token(
    request: Request,
    form: Annotated[TokenForm, Form()],
    session: Session = Depends(db),
    user: User = Depends(require("researcher", "admin")),
) -> Response:
    days = None
    expires = form.expires_in_days.strip()
    if expires:
        if not (expires.isascii() and expires.isdigit()):
            raise InputError("a number of days", field="expires_in_days")
        # form_number: int() refuses 4,300 digits with a ValueError (a 500; round 13)
        days = int(form_number(expires, "expires_in_days") or 0)
    token = create_token(session, session.merge(user), form.name, days)
    session.commit()
    return render(request, "research/account.html", user=user, new_token=token, tokens=_tokens(session, user))


@router.post("/account/tokens/{token_id}/revoke")
def revoke_token(
    request: Request, token_id: Id, session: Session = Depends(db), user: User = Depends(require("researcher", "admin"))
) -> Response:
    revoke(session, token_id, user)
    return RedirectResponse("/account", status_code=303)


def revoke(session: Session, token_id: Id, user: User) -> ApiToken:
    """Revoke one of the user's tokens (an admin: anyone's); 404 for another's."""
    row = session.get(ApiToken, token_id)
    if row is None or (row.user_id != user.id and user.role != "admin"):
        raise HTTPException(404, "no such token among yours")
    row.revoked = True
    session.commit()
    return row


def crowd_params(params: Mapping[str, str]) -> tuple[str, str, str, str]:
    """(platform, worker id, assignment id, hit id) from a crowd platform's parameters
    (app/crowd); 400 for none, or one longer than its column (the page's link and the API's
    body alike)."""
    entry = crowd.identify(params)
    if entry is None:
        raise HTTPException(400, crowd.missing_worker_message())
    found = (entry.platform, entry.worker_id, entry.assignment_id, entry.hit_id)
    for name, value in zip(("worker id", "assignment id", "hit id"), found[1:]):
        if len(value) > 255:
            raise HTTPException(400, f"The {name} in this link is too long.")
        if char := unshowable_name(value):
            # A worker writes their own id into the link; the researcher's pages and
            # completions.csv show it (issue 26, round 14: "\u202e" and another's id reversed
            # showed as that other worker; round 16: "W1 " showed as "W1").
            raise HTTPException(400, f"The {name} in this link holds a character that cannot be shown ({char}).")
    return found


# A crowd browser's own secret: a bundle keeps its hash and answers only the browser that
# holds it (a worker id alone, which others may know, opens nothing). API clients may send it
# in this header instead of the cookie.
BROWSER_COOKIE = "proctor_crowd"
BROWSER_HEADER = "X-Proctor-Browser"


def browser_secret(request: Request) -> str | None:
    """The secret this browser (or API client) presents, if any."""
    secret = request.headers.get(BROWSER_HEADER) or request.cookies.get(BROWSER_COOKIE)
    if secret is not None and not 16 <= len(secret) <= 128:
        raise HTTPException(
            400, "This browser's study key is malformed: clear this site's cookies and open the link again."
        )
    return secret


def presented_browser(request: Request) -> str | None:
    """The hash of the secret this browser presents (what a bundle keeps), or None."""
    secret = browser_secret(request)
    return assignment.browser_hash(secret) if secret is not None else None


class Entry(NamedTuple):
    """What entering a study takes, in the order assignment.enter and hotpath.enter take it."""

    platform: str
    worker_id: str
    assignment_id: str
    hit_id: str
    browser: str  # the hash of the browser's secret
    address: str  # the pseudonym of the client's address


def crowd_entry(request: Request, params: Mapping[str, str]) -> tuple[Entry, str]:
    """The entry from the link's parameters (400 for an id past its column) and this browser,
    and the browser's secret (a new one when it had none)."""
    platform, worker, assignment_id, hit = crowd_params(params)
    secret = browser_secret(request) or secrets.token_urlsafe(32)
    browser, address = assignment.browser_hash(secret), assignment.address_pseudonym(client_address(request))
    return Entry(platform, worker, assignment_id, hit, browser, address), secret


def enter_crowd(request: Request, session: Session, study: Study, params: Mapping[str, str]) -> tuple[Bundle, str, str]:
    """Enter the study with the link's parameters from this browser: (bundle, platform,
    the browser's secret, a new one when it had none)."""
    entry, secret = crowd_entry(request, params)
    bundle = assignment.enter(session, study, *entry)
    remember_entry(request, study.slug, bundle.id, entry.platform, params)
    return bundle, entry.platform, secret


def fast_enter(request: Request, slug: str, params: Mapping[str, str]) -> tuple[StudyConf, Entered, str] | None:
    """Entry in one round trip on PostgreSQL (app/studies/hotpath.py): (the study's entry
    texts, the bundle, the browser's secret), or None: take the engine's path (enter_crowd),
    which answers every refusal, SQLite and the rare cases."""
    from app.studies import hotpath

    url = request.app.state.database_url
    if not hotpath.enabled(url) or crowd.is_preview(params):
        return None
    info = hotpath.study(url, slug)
    if info is None:  # no such study: the engine's 404
        return None
    entry, secret = crowd_entry(request, params)
    entered = hotpath.enter(url, info, *entry)
    if entered is None:
        return None
    remember_entry(request, slug, entered.bundle_id, entry.platform, params)
    return info, entered, secret


def keep_browser_secret(response: Response, secret: str) -> None:
    response.set_cookie(
        BROWSER_COOKIE,
        secret,
        max_age=180 * 24 * 3600,
        path="/",
        httponly=True,
        samesite="lax",
        secure=get_settings().base_url.startswith("https"),
    )


def remember_entry(request: Request, slug: str, bundle_id: int, platform: str, params: Mapping[str, str]) -> None:
    """The signed session remembers which bundle this browser works on, per study."""
    request.session["crowd"] = {**request.session.get("crowd", {}), slug: bundle_id}
    request.session["platform"] = platform
    request.session.update(crowd.platform(platform).remember(params))


@router.get("/s/{slug}")
def entry(request: Request, slug: str) -> Response:
    rate_limit(request, "entry", get_settings().rate_limit_entry)
    fast = fast_enter(request, slug, request.query_params)
    if fast is not None:
        response = RedirectResponse(f"/task/{slug}", status_code=303)
        keep_browser_secret(response, fast[2])
        return response
    with get_sessionmaker(request.app.state.database_url)() as session:
        return _entry(request, session, slug)


def _entry(request: Request, session: Session, slug: str) -> Response:
    study = session.scalar(select(Study).where(Study.slug == slug))
    if study is None:
        raise HTTPException(404, "No study at this link.")
    if crowd.is_preview(request.query_params):
        return render(request, "annotate/preview.html", study=study, details=consent_details(study))
    _, _, secret = enter_crowd(request, session, study, request.query_params)
    response = RedirectResponse(f"/task/{slug}", status_code=303)
    keep_browser_secret(response, secret)
    return response
