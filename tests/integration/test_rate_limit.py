"""The Redis-backed rate limiter (app.auth.security.RateLimiter via app.web.rate_limit) against a
real Redis: past the limit a client gets 429 and a message, web processes share one count, and
with Redis unreachable requests are let through.

The limiter counts per one-minute bucket (rl:<bucket>:<client>:<minute>); the clock is frozen
at a minute of this test's own, so a minute boundary cannot reset the count mid-test and tests
running beside this one (the same Redis database) never share its keys."""

from __future__ import annotations

import logging
import random
import socket
import types

import pytest
import redis
from fastapi.testclient import TestClient

from app.auth import security
from app.config import get_settings
from app.main import create_app

MESSAGE = "too many requests: wait a minute and try again"
MISSING = "/s/no-such-study"  # the entry link is rate limited before the study is looked up


@pytest.fixture
def frozen_minute(monkeypatch) -> int:
    minute = random.randrange(10**7, 10**8)
    monkeypatch.setattr(security, "time", types.SimpleNamespace(time=lambda: minute * 60 + 30.0))
    return minute


def _configure(monkeypatch, redis_url: str, per_minute: int) -> None:
    monkeypatch.setenv("REDIS_URL", redis_url)
    monkeypatch.setenv("RATE_LIMIT_ENTRY", str(per_minute))
    get_settings.cache_clear()


@pytest.fixture
def shared_redis(redis_server, sqlite_url, monkeypatch, frozen_minute):
    _configure(monkeypatch, redis_server, 3)
    r = redis.Redis.from_url(redis_server)
    key = f"rl:entry:testclient:{frozen_minute}"
    r.delete(key)
    yield r, key
    r.delete(key)
    r.close()
    get_settings.cache_clear()


def test_past_the_limit_a_client_gets_429_with_a_message(sqlite_url, shared_redis):
    r, key = shared_redis
    with TestClient(create_app(sqlite_url)) as client:
        for _ in range(3):
            assert client.get(MISSING).status_code == 404  # allowed: the study is looked up
        page = client.get(MISSING)
        assert page.status_code == 429
        assert "Slow down" in page.text and MESSAGE in page.text
        api = client.get(MISSING, headers={"Accept": "application/json"})
        assert (api.status_code, api.json()) == (429, {"detail": MESSAGE})
    assert int(r.get(key)) == 5  # the count lives in Redis
    assert 0 < r.ttl(key) <= 120


def test_two_web_processes_share_one_count(sqlite_url, shared_redis):
    r, key = shared_redis
    one, two = create_app(sqlite_url), create_app(sqlite_url)
    with TestClient(one) as a, TestClient(two) as b:
        assert a.get(MISSING).status_code == 404
        assert a.get(MISSING).status_code == 404
        assert b.get(MISSING).status_code == 404  # the third request of the minute, on the other app
        # Each app counts with its own limiter (as two processes would) ...
        assert one.state.rate_limiter is not two.state.rate_limiter
        # ... yet the fourth request is refused by either: the count is shared through Redis.
        assert b.get(MISSING).status_code == 429
        assert a.get(MISSING).status_code == 429
    assert int(r.get(key)) == 5


def test_with_redis_unreachable_requests_are_allowed(sqlite_url, monkeypatch, frozen_minute, caplog):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    _configure(monkeypatch, f"redis://127.0.0.1:{port}/0", 2)
    try:
        with caplog.at_level(logging.WARNING, logger="app.auth.security"), \
                TestClient(create_app(sqlite_url)) as client:
            codes = [client.get(MISSING).status_code for _ in range(5)]
    finally:
        get_settings.cache_clear()
    assert codes == [404] * 5  # past the limit of 2, and neither 429 nor 500
    warnings = [rec.getMessage() for rec in caplog.records if rec.name == "app.auth.security"]
    assert len(warnings) == 5
    assert warnings[0].startswith("rate limit entry:testclient not applied: Redis is unreachable")
