"""Passwords, API tokens, CSRF and rate limits."""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
from datetime import timedelta
from typing import Any

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerifyMismatchError
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.auth.models import ApiToken, User
from app.db import utcnow
from app.errors import InputError

log = logging.getLogger(__name__)
_hasher = PasswordHasher()


def hash_password(password: str) -> str:
    return _hasher.hash(password)


_dummy: dict[int, str] = {}
MIN_PASSWORD = 10


def verify_password(stored: str | None, password: str) -> bool:
    """Whether the password matches the stored hash. With no account (or no password) a dummy
    hash is checked all the same, so the answer takes as long and the timing tells nobody
    which emails have accounts."""
    if not stored:
        dummy = _dummy.setdefault(id(_hasher), _hasher.hash(secrets.token_urlsafe(16)))
        try:
            _hasher.verify(dummy, password)
        except (VerifyMismatchError, InvalidHashError):
            pass
        return False
    try:
        return _hasher.verify(stored, password)
    except (VerifyMismatchError, InvalidHashError):
        return False


def password_problem(password: str) -> str | None:
    """Why a new password is refused, or None: long enough, and not all one character."""
    if len(password) < MIN_PASSWORD:
        return f"a password needs at least {MIN_PASSWORD} characters"
    if len(set(password)) < 4:
        return "a password needs more than a few different characters"
    return None


def _token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


MAX_TOKEN_DAYS = 3650


def create_token(session: Session, user: User, name: str = "", expires_in_days: int | None = None) -> str:
    """A new API token (shown once; only its hash is kept), valid until revoked or, with
    `expires_in_days`, until then."""
    expires = None
    if expires_in_days is not None:
        if isinstance(expires_in_days, bool) or not 1 <= expires_in_days <= MAX_TOKEN_DAYS:
            raise InputError(f"a token expires in 1 to {MAX_TOKEN_DAYS} days", field="expires_in_days")
        expires = utcnow() + timedelta(days=expires_in_days)
    token = "pct_" + secrets.token_urlsafe(32)
    session.add(ApiToken(user_id=user.id, name=name[:100], token_hash=_token_hash(token), expires_at=expires))
    session.flush()
    return token


def user_for_token(session: Session, token: str) -> User | None:
    row = session.scalar(
        select(ApiToken).where(
            ApiToken.token_hash == _token_hash(token),
            ApiToken.revoked.is_(False),
            (ApiToken.expires_at.is_(None)) | (ApiToken.expires_at > utcnow()),
        )
    )
    return session.get(User, row.user_id) if row else None


def csrf_token(session_data: dict[str, Any]) -> str:
    if "csrf" not in session_data:
        session_data["csrf"] = secrets.token_urlsafe(24)
    return str(session_data["csrf"])


def csrf_ok(session_data: dict[str, Any], presented: object) -> bool:
    """The form's token is the session's; anything but a string (a file sent under the name) is not."""
    expected = session_data.get("csrf")
    if not (expected and isinstance(presented, str) and presented):
        return False
    # As bytes: compare_digest refuses str with characters beyond ASCII (a TypeError, a 500).
    return hmac.compare_digest(str(expected).encode(), presented.encode("utf-8", "surrogatepass"))


class RateLimiter:
    """Requests per minute per key, in a moving window (the `limits` package). With REDIS_URL
    set the count lives in Redis, so every web process shares it; without, in this process.
    When Redis cannot be reached the limiter fails open to this process's own count (a warning
    is logged): an outage of the counter never takes the crowd pages down, and never lifts the
    limit altogether."""

    def __init__(self, redis_url: str = "", namespace: str = "proctor"):
        from limits import storage, strategies

        self.namespace = namespace
        self._local = strategies.MovingWindowRateLimiter(storage.MemoryStorage())
        self._shared = None
        if redis_url:
            # limits reads redis.__version__ of whatever sys.modules holds: a module another
            # thread is still importing reads "0.0.0" and is refused (a 500 on a fresh web
            # process's first concurrent requests). A plain import waits for that import.
            import redis  # noqa: F401

            self._shared = strategies.MovingWindowRateLimiter(
                storage.storage_from_string(redis_url, socket_connect_timeout=1, socket_timeout=1)
            )

    def allow(self, key: str, per_minute: int) -> bool:
        from limits import RateLimitItemPerMinute

        if per_minute <= 0:
            return True
        item = RateLimitItemPerMinute(per_minute)
        if self._shared is not None:
            try:
                return self._shared.hit(item, self.namespace, key)
            except Exception as exc:  # Redis down, full or refusing: count here instead
                log.warning(
                    "rate limit %s counted in this process only: Redis is unreachable (%s)", key, type(exc).__name__
                )
        return self._local.hit(item, self.namespace, key)
