"""Passwords, API tokens, CSRF and rate limits."""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
import threading
import time
from collections import defaultdict, deque

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerifyMismatchError
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.auth.models import ApiToken, User

log = logging.getLogger(__name__)
_hasher = PasswordHasher()


def hash_password(password: str) -> str:
    return _hasher.hash(password)


def verify_password(stored: str | None, password: str) -> bool:
    if not stored:
        return False
    try:
        return _hasher.verify(stored, password)
    except (VerifyMismatchError, InvalidHashError):
        return False


def _token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def create_token(session: Session, user: User, name: str = "") -> str:
    token = "pct_" + secrets.token_urlsafe(32)
    session.add(ApiToken(user_id=user.id, name=name, token_hash=_token_hash(token)))
    session.flush()
    return token


def user_for_token(session: Session, token: str) -> User | None:
    row = session.scalar(select(ApiToken).where(ApiToken.token_hash == _token_hash(token),
                                                ApiToken.revoked.is_(False)))
    return session.get(User, row.user_id) if row else None


def csrf_token(session_data: dict) -> str:
    if "csrf" not in session_data:
        session_data["csrf"] = secrets.token_urlsafe(24)
    return session_data["csrf"]


def csrf_ok(session_data: dict, presented: str | None) -> bool:
    expected = session_data.get("csrf")
    return bool(expected and presented and hmac.compare_digest(expected, presented))


class RateLimiter:
    """Sliding one-minute window per key. Redis-backed when REDIS_URL is set, so that all
    web replicas share the count; in-process otherwise (the embedded single process).
    With Redis unreachable it fails open: requests are allowed (and a warning logged), so
    an outage of the counter never takes the crowd pages down with it."""

    def __init__(self, redis_url: str = ""):
        self._redis = None
        if redis_url:
            import redis

            self._redis = redis.Redis.from_url(redis_url, socket_connect_timeout=1, socket_timeout=1)
            self._redis_error = redis.RedisError
        self._hits: dict[str, deque] = defaultdict(deque)
        self._lock = threading.Lock()

    def allow(self, key: str, per_minute: int) -> bool:
        if per_minute <= 0:
            return True
        now = time.time()
        if self._redis is not None:
            bucket = f"rl:{key}:{int(now // 60)}"
            pipe = self._redis.pipeline()
            pipe.incr(bucket)
            pipe.expire(bucket, 120)
            try:
                count, _ = pipe.execute()
            except self._redis_error as exc:
                log.warning("rate limit %s not applied: Redis is unreachable (%s)", key, exc)
                return True
            return count <= per_minute
        with self._lock:
            hits = self._hits[key]
            while hits and hits[0] < now - 60:
                hits.popleft()
            if len(hits) >= per_minute:
                return False
            hits.append(now)
            return True
