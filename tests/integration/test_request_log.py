"""The request log: one line per request, and no worker id in clear."""

from __future__ import annotations

import logging

import pytest

from tests.conftest import create_tom_study, make_user


@pytest.fixture
def log_app(sqlite_url):
    from app.main import create_app

    return create_app(sqlite_url)


def test_one_line_per_request_with_worker_ids_hashed(log_app, sqlite_url, caplog):
    from fastapi.testclient import TestClient

    from app.db import get_sessionmaker

    with get_sessionmaker(sqlite_url)() as s:
        slug = create_tom_study(s, make_user(s, "researcher")).slug
    caplog.set_level(logging.INFO, logger="proctor.requests")
    with TestClient(log_app) as c:
        r = c.get(f"/s/{slug}?PROLIFIC_PID=secretworker42&STUDY_ID=st9&SESSION_ID=se7", follow_redirects=False)
        assert r.status_code == 303
        assert c.get("/no/such/page").status_code == 404
        again = c.get(f"/s/{slug}?PROLIFIC_PID=secretworker42&STUDY_ID=st9&SESSION_ID=se7", follow_redirects=False)
        assert again.status_code == 303
    lines = [r.getMessage() for r in caplog.records if r.name == "proctor.requests"]
    assert len(lines) == 3, lines
    method, target, status, ms = lines[0].split(" ")
    assert (method, status) == ("GET", "303") and ms.endswith("ms") and float(ms[:-2]) >= 0
    assert target.startswith(f"/s/{slug}?PROLIFIC_PID=h:") and "&STUDY_ID=h:" in target
    assert lines[1].startswith("GET /no/such/page 404 ")
    # The same worker hashes the same (their lines can be matched), and is never in clear.
    assert lines[2].split(" ")[1] == target
    assert not any(secret in line for line in lines for secret in ("secretworker42", "st9", "se7"))


def test_the_level_is_configurable(sqlite_url, monkeypatch, caplog):
    from fastapi.testclient import TestClient

    from app.config import get_settings
    from app.main import InsecureSettings, create_app

    monkeypatch.setenv("LOG_LEVEL", "warning")
    get_settings.cache_clear()
    caplog.set_level(logging.DEBUG, logger="proctor.requests")
    try:
        app = create_app(sqlite_url)
        with TestClient(app) as c:
            assert c.get("/healthz").status_code == 200
        assert not [r for r in caplog.records if r.name == "proctor.requests"]
        monkeypatch.setenv("LOG_LEVEL", "chatty")
        get_settings.cache_clear()
        with pytest.raises(InsecureSettings, match="LOG_LEVEL"):
            create_app(sqlite_url)
    finally:
        monkeypatch.delenv("LOG_LEVEL")
        get_settings.cache_clear()
        create_app(sqlite_url)  # the level back to the default for the tests after this one
