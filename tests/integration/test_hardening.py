"""Smaller hardening items of issue 10.7, each as a user (or an attacker) would notice it."""

from __future__ import annotations

import csv
import io
import json
from app import jobs
from app.storage import get_store
from app.studies import services
from tests.conftest import login, make_user
from tests.integration.test_cli_demo import run_cli


def test_exported_csv_cells_never_run_as_formulas(session):
    owner = make_user(session, "researcher")
    rows = [
        {"id": '=HYPERLINK("http://evil.example","x")', "sentence": "one two"},
        {"id": "+1+1", "sentence": "three"},
        {"id": "plain", "sentence": "four five six"},
    ]
    data = "".join(json.dumps(r) + "\n" for r in rows).encode()
    study = services.create_study(
        session, owner, "wordcount", services.StudySettings(title="Formulas", gold_rate=0.0), data, "jsonl"
    )
    services.set_state(session, study, "live", owner)
    from app.studies import assignment

    bundle = assignment.enter(session, study, "prolific", "@worker", "s", "x")
    while (a := assignment.next_item(session, study, bundle.id)) is not None:
        assignment.submit(session, study, bundle.id, a.id, {"words": 2}, f"k{a.id}")
    agent = services.register_agent(session, owner, "wordcount", "-agent")
    services.import_agent_outputs(session, study, agent, b'{"id": "plain", "words": 3}\n')
    job = jobs.create_job(session, "export", study_id=study.id, owner_id=owner.id)
    session.commit()
    assert jobs.run_job(job.id) == "done"
    session.refresh(job)
    store = get_store()
    table = list(csv.DictReader(io.StringIO(store.get(job.result["files"]["annotations.csv"]).decode())))
    assert sorted(r["item"] for r in table) == ["'+1+1", '\'=HYPERLINK("http://evil.example","x")', "plain"]
    scores = store.get(job.result["files"]["scores.csv"]).decode()
    assert "'-agent v1" in scores and "\n-agent" not in scores
    # The JSONL keeps the values exactly.
    jsonl = [json.loads(line) for line in store.get(job.result["files"]["annotations.jsonl"]).decode().splitlines()]
    assert sorted(r["item"] for r in jsonl)[0] == "+1+1"


def test_pages_cannot_be_framed_except_the_crowds_by_mturk(client, session):
    home = client.get("/login")
    assert home.headers["x-frame-options"] == "DENY"
    assert home.headers["content-security-policy"].endswith("frame-ancestors 'none'")
    entry = client.get("/s/no-such-study", follow_redirects=False)
    assert "x-frame-options" not in entry.headers
    assert "frame-ancestors 'self' https://worker.mturk.com" in entry.headers["content-security-policy"]


def test_logins_are_limited_per_account_and_unknown_emails_take_as_long(client, session, monkeypatch):
    owner = make_user(session, "researcher")
    from tests.conftest import csrf_of

    token = csrf_of(client)
    codes = [
        client.post("/login", data={"email": owner.email, "password": f"wrong-{k}", "csrf_token": token}).status_code
        for k in range(11)
    ]
    # One client, but the per-account limit (10 a minute) is the one that refuses.
    assert codes == [401] * 10 + [429]
    from app.auth import security

    calls = []
    real = security._hasher

    class Counting:  # the same hasher, counting the hashes it checks
        def hash(self, password):
            return real.hash(password)

        def verify(self, stored, password):
            calls.append(stored)
            return real.verify(stored, password)

    monkeypatch.setattr(security, "_hasher", Counting())
    assert security.verify_password(None, "anything") is False
    assert len(calls) == 1  # a dummy hash was checked: no shortcut for unknown accounts


def test_a_weak_password_is_refused_when_an_account_is_made(tmp_path):
    env = {"DATABASE_URL": f"sqlite:///{tmp_path / 'u.db'}", "REDIS_URL": ""}
    assert run_cli("migrate", env=env).returncode == 0
    for bad, why in (("short1", "at least 10 characters"), ("aaaaaaaaaaaa", "different characters")):
        out = run_cli("user", "create", "--email", "a@example.org", "--role", "researcher", "--password", bad, env=env)
        assert out.returncode == 1 and why in out.stderr
    ok = run_cli(
        "user",
        "create",
        "--email",
        "a@example.org",
        "--role",
        "researcher",
        "--password",
        "correct horse battery",
        env=env,
    )
    assert ok.returncode == 0, ok.stderr


def test_the_schematic_escapes_ids_from_the_data():
    """A map's id prefix comes from the page (an item's id): markup in it stays text."""
    import xml.etree.ElementTree as ET

    from app.kinds.navigation.house import generate_house, sample_paths
    from app.kinds.navigation.schematic import floor_maps

    house = generate_house(2)
    graph = house.graph()
    ref = list(sample_paths(house, 1, rng=0)[0].path)
    hostile = 'x"><script>alert(1)</script><g id="'
    svg = floor_maps(graph, ref, ref, id_prefix=hostile)[0].svg
    assert "<script>" not in svg
    root = ET.fromstring(svg)  # still one well-formed SVG element
    assert root.get("id") == f"{hostile}-f0"


def test_an_oversized_body_is_refused_before_it_is_read(db_url, monkeypatch):
    """A body past the largest upload is refused with 413 before parsing (FastAPI reads a form
    before it checks who posts it): by its declared length, or by counting when it declares
    none. An honest upload still passes."""
    from fastapi.testclient import TestClient

    from app.config import get_settings
    from app.main import create_app

    monkeypatch.setenv("MAX_UPLOAD_BYTES", str(1 << 20))
    monkeypatch.setenv("MAX_ARTIFACT_BYTES", str(1 << 20))
    get_settings.cache_clear()
    try:
        client = TestClient(create_app(db_url))
        limit = 2 << 20  # the largest upload plus 1 MB for the form around it
        form = {"Content-Type": "multipart/form-data; boundary=xyz"}
        r = client.post("/api/v1/studies", content=b"x" * 10, headers={**form, "Content-Length": str(limit + 1)})
        assert r.status_code == 413 and r.json() == {"detail": "the request is larger than the 2 MB limit"}

        def chunks():  # no Content-Length: streamed, and counted as it arrives
            for _ in range(3):
                yield b"--xyz\r\n" + b"x" * (1 << 20)

        # (from an account: an anonymous one is turned away before its body is read at all)
        from app.auth.security import create_token
        from app.db import get_sessionmaker

        with get_sessionmaker(db_url)() as s:
            token = create_token(s, make_user(s, "researcher"))
            s.commit()
        r = client.post("/api/v1/studies", content=chunks(), headers={**form, "Authorization": f"Bearer {token}"})
        assert r.status_code == 413
        assert client.get("/healthz").status_code == 200  # and the app answers on
        small = client.post("/api/v1/studies", files={"file": ("q.csv", b"a,b\n", "text/csv")})
        assert small.status_code == 403  # refused for what it is: no CSRF token (unread, test_auth_before_body.py)
    finally:
        get_settings.cache_clear()


def test_a_database_outage_answers_503_with_retry_after(tmp_path):
    """The database cannot be reached (here: a PostgreSQL port nothing listens on): the API
    answers 503 with Retry-After in its JSON shape, pages in plain text; never a bare 500."""
    import socket

    from fastapi.testclient import TestClient

    from app.db import get_engine, get_sessionmaker
    from app.main import create_app

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"postgresql+psycopg://postgres@127.0.0.1:{port}/gone?connect_timeout=2"
    try:
        client = TestClient(create_app(url), raise_server_exceptions=False)
        r = client.get("/api/v1/studies", headers={"Authorization": "Bearer pct_x"})
        assert r.status_code == 503 and r.headers["Retry-After"] == "10"
        assert r.json() == {"detail": "the database cannot be reached right now: try again in a few seconds"}
        page = client.get("/s/some-study")
        assert page.status_code == 503 and "try again" in page.text
    finally:
        get_engine.cache_clear()
        get_sessionmaker.cache_clear()


def test_logging_out_ends_every_session_of_the_account_a_copied_cookie_too(app, session):
    from fastapi.testclient import TestClient

    from tests.conftest import csrf_of

    owner = make_user(session, "researcher")
    laptop, thief = TestClient(app), TestClient(app)
    login(laptop, owner)
    for cookie in laptop.cookies.jar:  # the session cookie, copied to another browser
        thief.cookies.jar.set_cookie(cookie)
    assert thief.get("/studies", follow_redirects=False).status_code == 200
    laptop.post("/logout", data={"csrf_token": csrf_of(laptop)})
    assert thief.get("/studies", follow_redirects=False).status_code == 303  # to the login page
    again = TestClient(app)
    login(again, owner)  # logging in afresh works
    assert again.get("/studies", follow_redirects=False).status_code == 200


def test_api_tokens_are_listed_revoked_and_expire(app, client, session):
    from datetime import timedelta

    from app.auth.models import ApiToken
    from app.auth.security import create_token
    from app.db import utcnow

    owner = make_user(session, "researcher")
    lasting = create_token(session, owner, "lasting")
    short = create_token(session, owner, "short", expires_in_days=1)
    session.commit()
    api = lambda token: client.get("/api/v1/tokens", headers={"Authorization": f"Bearer {token}"})  # noqa: E731
    listed = api(lasting).json()
    assert [(t["name"], t["revoked"], t["expires_at"] is None) for t in listed] == [
        ("lasting", False, True),
        ("short", False, False),
    ]
    assert all("token" not in t and "hash" not in str(t) for t in listed)
    # Past its expiry a token stops working.
    session.query(ApiToken).filter_by(name="short").update({"expires_at": utcnow() - timedelta(seconds=1)})
    session.commit()
    assert api(short).status_code == 401
    # Revoked through the API, a token stops working at once.
    r = client.post(f"/api/v1/tokens/{listed[0]['id']}/revoke", headers={"Authorization": f"Bearer {lasting}"})
    assert r.json() == {"id": listed[0]["id"], "revoked": True}
    assert api(lasting).status_code == 401
    # The account page lists them with their state, and refuses a bad expiry.
    csrf = login(client, owner)
    page = client.get("/account").text
    assert page.count("revoked") >= 1 and "never" in page and "short" in page
    bad = client.post("/account/tokens", data={"csrf_token": csrf, "name": "x", "expires_in_days": "0"})
    assert bad.status_code == 422
