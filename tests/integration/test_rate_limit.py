"""The rate limiter (app.auth.security.RateLimiter via app.web.rate_limit, on the `limits`
package) against a real Redis: past the limit a client gets 429 and a message, web processes
share one count, and with Redis unreachable each process keeps counting on its own (a warning
is logged) rather than answering 500 or lifting the limit.

Each test counts under a namespace of its own, so tests beside it (the same Redis database)
never share its counts."""

from __future__ import annotations

import logging
import socket
import uuid

import pytest
import redis
from fastapi.testclient import TestClient

from app.config import get_settings
from app.main import create_app

MESSAGE = "too many requests: wait a minute and try again"
MISSING = "/s/no-such-study"  # the entry link is rate limited before the study is looked up


def _configure(monkeypatch, redis_url: str, per_minute: int) -> str:
    namespace = f"proctor-test-{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("REDIS_URL", redis_url)
    monkeypatch.setenv("RATE_LIMIT_ENTRY", str(per_minute))
    monkeypatch.setenv("RATE_LIMIT_NAMESPACE", namespace)
    get_settings.cache_clear()
    return namespace


@pytest.fixture
def shared_redis(redis_server, sqlite_url, monkeypatch):
    namespace = _configure(monkeypatch, redis_server, 3)
    r = redis.Redis.from_url(redis_server)
    yield r, namespace
    for key in r.scan_iter(f"*{namespace}*"):
        r.delete(key)
    r.close()
    get_settings.cache_clear()


def test_past_the_limit_a_client_gets_429_with_a_message(sqlite_url, shared_redis):
    r, namespace = shared_redis
    with TestClient(create_app(sqlite_url)) as client:
        for _ in range(3):
            assert client.get(MISSING).status_code == 404  # allowed: the study is looked up
        page = client.get(MISSING)
        assert page.status_code == 429
        assert "Slow down" in page.text and MESSAGE in page.text
        api = client.get(MISSING, headers={"Accept": "application/json"})
        assert (api.status_code, api.json()) == (429, {"detail": MESSAGE})
    keys = list(r.scan_iter(f"*{namespace}*"))
    assert keys and all(b"entry:testclient" in k for k in keys)  # the count lives in Redis


def test_two_web_processes_share_one_count(sqlite_url, shared_redis):
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


def test_with_redis_unreachable_the_process_counts_on_its_own(sqlite_url, monkeypatch, caplog):
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
    assert codes == [404, 404, 429, 429, 429]  # the limit holds, and nothing answers 500
    warnings = [rec.getMessage() for rec in caplog.records if rec.name == "app.auth.security"]
    assert len(warnings) == 5
    assert warnings[0] == ("rate limit entry:testclient counted in this process only: Redis is "
                           "unreachable (ConnectionError)")
