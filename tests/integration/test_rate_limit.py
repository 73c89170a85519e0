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
        with caplog.at_level(logging.WARNING, logger="app.auth.security"), TestClient(create_app(sqlite_url)) as client:
            codes = [client.get(MISSING).status_code for _ in range(5)]
    finally:
        get_settings.cache_clear()
    assert codes == [404, 404, 429, 429, 429]  # the limit holds, and nothing answers 500
    warnings = [rec.getMessage() for rec in caplog.records if rec.name == "app.auth.security"]
    assert len(warnings) == 5
    assert warnings[0] == (
        "rate limit entry:testclient counted in this process only: Redis is unreachable (ConnectionError)"
    )


FIRST_REQUESTS = r"""
import sys, threading
from starlette.requests import Request
from app.main import create_app
from app.web import rate_limit

app = create_app(sys.argv[1])
assert "redis" not in sys.modules, "redis is imported already: this run proves nothing"
barrier, errors, limiters = threading.Barrier(8), [], set()

def first_request():
    request = Request({"type": "http", "app": app, "client": ("127.0.0.1", 1), "headers": []})
    barrier.wait()
    try:
        rate_limit(request, "entry", 1000)
        limiters.add(id(app.state.rate_limiter))
    except Exception as exc:
        errors.append(f"{type(exc).__name__}: {exc}")

threads = [threading.Thread(target=first_request) for _ in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(len(limiters), errors)
"""


def test_a_fresh_process_first_concurrent_requests_are_counted(sqlite_url, shared_redis, tmp_path):
    """A web process just (re)started takes its first requests on several threads at once.
    Found by bench/faults.py: each built its own limiter, and `limits` judged redis by the
    version of a module another thread was still importing ("0.0.0"), so they answered 500."""
    import os
    import subprocess
    import sys

    from tests.conftest import ROOT

    script = tmp_path / "first_requests.py"
    script.write_text(FIRST_REQUESTS)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, str(script), sqlite_url], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "1 []", done.stdout  # one limiter, and no request refused
